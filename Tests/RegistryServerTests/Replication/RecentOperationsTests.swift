import RegistryCore
import Testing
@testable import RegistryServer

/// The operations kept in memory for the peer links.
@Suite struct RecentOperationsTests {
    let a = NodeID(trusted: "node-a")
    let b = NodeID(trusted: "node-b")

    func ops(_ node: NodeID, _ sequences: ClosedRange<UInt64>) throws -> [LoggedOperation] {
        let stamp = HLCTimestamp(millis: 1, counter: 0)
        let op = Operation.registration(
            RegistrationOp(
                device: DeviceRef(id: DeviceID(UUID128(high: 1, low: 1)), created: stamp, origin: node, vendor: Vendor(trusted: "com.v")),
                bundle: try BundleID(parsing: "com.v.app"), claims: [], merged: [], seen: stamp))
        return sequences.map { LoggedOperation(origin: node, epoch: 1, sequence: $0, timestamp: stamp, operation: op) }
    }

    @Test func keepsTheNewestOperationsOfEachLogAndReadsThemInOrder() throws {
        let recent = RecentOperations(capacityPerLog: 10)
        let logA = VersionVector.Log(origin: a, epoch: 1)
        recent.append(try ops(a, 1...4) + ops(b, 1...2) + ops(a, 5...6))
        recent.append(try ops(a, 7...12))
        recent.append(try ops(a, 13...20))
        // At least 10 kept, in whole commits: 7...20.
        #expect(recent.read(logA, from: 5, atMost: 100) == nil, "no longer kept: read the journal")
        #expect(recent.read(logA, from: 7, atMost: 100)?.map(\.sequence) == Array(7...20))
        #expect(recent.read(logA, from: 12, atMost: 3)?.map(\.sequence) == [12, 13, 14])
        #expect(recent.read(logA, from: 21, atMost: 3) == nil, "not made durable yet")
        #expect(recent.read(VersionVector.Log(origin: b, epoch: 1), from: 2, atMost: 9)?.map(\.sequence) == [2])
        // A run that does not follow the tail starts it over.
        recent.append(try ops(a, 30...31))
        #expect(recent.read(logA, from: 20, atMost: 9) == nil && recent.read(logA, from: 30, atMost: 9)?.count == 2)
    }
}
