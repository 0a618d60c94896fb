import Foundation
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// A peer's batch completes as a peer batch, not as a client's request: it hears what the node
/// holds, or why its batch was refused, and the node's request and error counts (what clients
/// asked and were told) leave it out.
@Suite(.serialized, .timeLimit(.minutes(5))) struct PeerBatchCompletionTests {
    func open(_ path: String, node: String) throws -> RegistryEngine {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID(node)
        return try RegistryEngine(configuration: configuration, logger: .quiet())
    }

    func applyRemote(_ engine: RegistryEngine, _ operations: [LoggedOperation]) async -> Result<[LogPosition], WireError> {
        await withCheckedContinuation { continuation in engine.submitRemote(operations) { continuation.resume(returning: $0) } }
    }

    @Test func aRefusedBatchIsThePeersAnswerAndNoClientRequest() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let a = try open(temp.path + "/a", node: "node-a")
        let b = try open(temp.path + "/b", node: "node-b")
        defer { for engine in [a, b] { engine.close() } }
        for index in 1...3 {
            let frame = ClientFrame(
                requestID: UInt64(index),
                body: .register(RegisterRequest(bundleID: "com.v.app1", idfv: UUID128(high: 7, low: UInt64(index)).text)))
            await withCheckedContinuation { continuation in a.submit([frame]) { _ in continuation.resume() } }
        }
        let operations = try a.logReader(for: a.peerIdentity.ownLog, from: 1).next(atMost: 10)
        #expect(operations.count >= 3)

        // Its first operation missing: a gap, refused whole.
        let refused = await applyRemote(b, Array(operations.dropFirst()))
        guard case .failure = refused else {
            Issue.record("a batch with a gap was applied: \(refused)")
            return
        }
        let held = try await applyRemote(b, operations).get()
        #expect(held.contains { $0.origin == "node-a" && $0.sequence == operations.last!.sequence })
        #expect(b.counters.requestsServed == 0, "peer batches are not client requests")
        #expect(b.counters.errorCounts.isEmpty, "a peer's refusal is not a client's error: \(b.counters.errorCounts)")
    }
}
