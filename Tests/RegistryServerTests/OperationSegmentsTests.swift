import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// ``OperationSegments``: how operations become the journal's segments.
@Suite struct OperationSegmentsTests {
    func operations(count: Int, origin: String, firstSequence: UInt64) throws -> [LoggedOperation] {
        var state = NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: origin), epoch: 7, nextSequence: firstSequence,
            rules: try VendorRules(), limits: Limits(maxFrameBytes: 1 << 20, maxBatchSize: UInt32(count), maxInFlight: 8))
        var generator = SplitMix64(seed: 3)
        var operations = [LoggedOperation]()
        let batch = (0..<count).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: 9, low: UInt64($0) + 1).text) }
        _ = state.handle(
            ClientFrame(requestID: 1, body: .registerBatch(batch)), wallMillis: 1_000, generator: &generator, operations: &operations)
        return operations
    }

    @Test func aLongRunIsCutAtTheSegmentLimit() throws {
        let operations = try operations(count: OperationSegments.maxRecords + 5, origin: "node-a", firstSequence: 1)
        let segments = try OperationSegments.encode(operations, with: OperationEncoder())
        #expect(segments.map(\.count) == [OperationSegments.maxRecords, 5])
        #expect(segments[0].firstSequence == 1 && segments[0].lastSequence == UInt64(OperationSegments.maxRecords))
        #expect(segments[1].firstSequence == UInt64(OperationSegments.maxRecords) + 1)
        #expect(segments.allSatisfy { $0.origin == "node-a" && $0.epoch == 7 })
    }

    @Test func anotherOriginStartsAnotherSegment() throws {
        let operations = try operations(count: 3, origin: "node-a", firstSequence: 1)
            + operations(count: 2, origin: "node-b", firstSequence: 40)
        let segments = try OperationSegments.encode(operations, with: OperationEncoder())
        #expect(segments.map(\.origin) == ["node-a", "node-b"] && segments.map(\.count) == [3, 2])
        #expect(segments[1].firstSequence == 40 && segments[1].lastSequence == 41)
        #expect(try OperationSegments.encode([], with: OperationEncoder()).isEmpty)
    }
}
