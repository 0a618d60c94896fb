import Foundation
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// Work that must run between two commits (a snapshot's start, a peer's snapshot's install, an
/// erasure check) runs between two passes of a commit loop that has more to write, not once the
/// writes stop: under steady writes the loop may not end for as long as they last. The engine is
/// real; its disk holds a commit's sync, so that the loop stands where the test needs it.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BetweenCommitsTests {
    /// A count that closures on other threads share.
    final class Count: Sendable {
        private let value = Atomic<Int>(0)
        var now: Int { value.load(ordering: .relaxed) }
        func add() { value.add(1, ordering: .relaxed) }
        func set(_ new: Int) { value.store(new, ordering: .relaxed) }
    }

    static func register(_ engine: RegistryEngine, _ number: UInt64, answered: Count) {
        let request = RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: number, low: 7).text)
        engine.submit([ClientFrame(requestID: number, body: .register(request))]) { _ in answered.add() }
    }

    @Test func workBetweenCommitsRunsBetweenTwoPassesOfALoopThatHasMoreToWrite() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let disk = GatedFileSystem(holdingRenamesTo: nil)
        let engine = try RegistryEngine(configuration: .withoutSnapshots(temp.path, node: "node-a"), logger: .quiet(), fs: disk)
        defer { engine.close() }
        let answered = Count()

        // The first pass is held in its sync; a second registration waits for the next pass.
        disk.holdNextSync()
        Self.register(engine, 1, answered: answered)
        guard await disk.waitUntilReached() else {
            Issue.record("the first commit's sync was never reached")
            return
        }
        Self.register(engine, 2, answered: answered)
        #expect(engine.core.withLockedValue { $0.commits.pendingOperations.count } == 1, "the second registration waits for the next pass")
        let ran = Count()
        engine.pipeline.runBetweenCommits { ran.set(answered.now + 1) }

        // The second pass is held too: the work must have run before it, after the first.
        disk.holdNextSync()
        disk.open()
        guard await disk.waitUntilReached() else {
            Issue.record("the second commit's sync was never reached")
            return
        }
        #expect(ran.now == 2, "the work ran after the first pass (1 answered) and before the second")
        disk.open()
        #expect(try await poll(upTo: .seconds(30)) { answered.now == 2 })
    }
}
