import RegistryCore
import RegistryStorage
import Testing
@testable import RegistryServer

/// The operations kept in memory for the peer links.
@Suite struct RecentOperationsTests {
    let a = NodeID(trusted: "node-a")
    let b = NodeID(trusted: "node-b")

    func ops(_ node: NodeID, _ sequences: ClosedRange<UInt64>, epoch: UInt64 = 1) throws -> [LogRecord] {
        sequences.map { LogRecord(origin: node.value, epoch: epoch, sequence: $0, hlc: 1 << 16, payload: [UInt8(truncatingIfNeeded: $0)]) }
    }

    @Test func keepsTheNewestOperationsOfEachLogAndReadsThemInOrder() throws {
        let recent = RecentOperations(capacity: 12)
        let logA = LogID(origin: a, epoch: 1)
        recent.append(runs: [try ops(a, 1...4), try ops(b, 1...2), try ops(a, 5...6)])
        // A commit's segments: one log's run cut in two, and an empty run.
        recent.append(runs: [try ops(a, 7...9), [], try ops(a, 10...12)])
        recent.append(runs: [try ops(a, 13...20)])
        // At least 12 kept in all, in whole runs: b's 1...2 and a's 1...6 went first.
        #expect(recent.read(logA, from: 5, atMost: 100) == nil, "no longer kept: read the journal")
        #expect(recent.read(logA, from: 7, atMost: 100)?.map(\.sequence) == Array(7...20))
        #expect(recent.read(logA, from: 12, atMost: 3)?.map(\.sequence) == [12, 13, 14])
        #expect(recent.read(logA, from: 21, atMost: 3) == nil, "not made durable yet")
        #expect(recent.read(LogID(origin: b, epoch: 1), from: 2, atMost: 9) == nil)
        // A run that does not follow the tail starts it over.
        recent.append(runs: [try ops(a, 30...31)])
        #expect(recent.read(logA, from: 20, atMost: 9) == nil && recent.read(logA, from: 30, atMost: 9)?.count == 2)
    }

    /// However many logs there are (a node's every start opens one), the node keeps a bounded
    /// number of operations; what every member holds goes; with no peer, nothing is kept.
    @Test func theBoundIsForTheWholeNodeAndWhatEveryMemberHoldsGoes() throws {
        let recent = RecentOperations(capacity: 100)
        for epoch in 1...50 as ClosedRange<UInt64> {
            let node = NodeID(trusted: "node-\(epoch % 3)")
            recent.append(runs: [try ops(node, 1...10, epoch: epoch)])
        }
        #expect(recent.count >= 100 && recent.count <= 110, "\(recent.count)")
        let newest = LogID(origin: NodeID(trusted: "node-2"), epoch: 50)
        #expect(recent.read(newest, from: 1, atMost: 20)?.count == 10)
        #expect(recent.read(LogID(origin: NodeID(trusted: "node-1"), epoch: 1), from: 1, atMost: 20) == nil)
        // Every member holds the newest log's first 10: it goes.
        recent.keepOnly(unheldBy: [newest: 10])
        #expect(recent.read(newest, from: 1, atMost: 20) == nil && recent.count >= 90)
        recent.keepOnly(unheldBy: nil)
        #expect(recent.count == 0)
        recent.append(runs: [try ops(a, 1...5)])
        #expect(recent.count == 0, "a node with no peer keeps nothing")
        recent.keepOnly(unheldBy: [:])
        recent.append(runs: [try ops(a, 1...5)])
        #expect(recent.count == 5)
    }
}
