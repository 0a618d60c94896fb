import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``OperationBatchWriter`` against protobuf-c, the oracle: the frame it writes is byte for byte
/// the frame protobuf-c packs for the same batch (`PeerFrame.encodeFrame(into:)`).
@Suite struct OperationBatchWriterTests {
    func packed(_ batch: OperationBatch) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try PeerFrame.batch(batch).encodeFrame(into: &buffer)
        return buffer
    }

    func written(_ batch: OperationBatch) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try OperationBatchWriter.writeFrame(batchID: batch.batchID, operations: batch.operations, into: &buffer)
        return buffer
    }

    /// Batches of real operations, and of fields at their edges: zeros (left out), the largest
    /// numbers (ten-byte varints), empty and long payloads, no operations at all (a probe).
    @Test func framesAreTheOnesProtobufCPacks() throws {
        var random = SplitMix64(seed: 83)
        for _ in 0..<500 {
            let batch = try OperationBatchReaderTests().randomBatch(&random)
            #expect(try written(batch) == packed(batch))
        }
        let edges: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, UInt64.max]
        for _ in 0..<300 {
            let operations = (0..<random.next() % 4).map { _ in
                PeerOperation(
                    origin: ["", "n", "node-with-a-longer-name"][Int(random.next() % 3)], epoch: edges[Int(random.next() % 7)],
                    sequence: edges[Int(random.next() % 7)], hlc: edges[Int(random.next() % 7)],
                    // A slice that does not start at 0, as a record's payload in a commit's shared bytes.
                    operation: ([7, 7] + (0..<[0, 1, 127, 128, 300][Int(random.next() % 5)]).map { _ in UInt8(truncatingIfNeeded: random.next()) })[2...])
            }
            let batch = OperationBatch(batchID: edges[Int(random.next() % 7)], operations: operations)
            #expect(try written(batch) == packed(batch))
        }
    }

    @Test func anOriginWithANULIsRefusedAndTheBufferLeftAsItWas() throws {
        let batch = OperationBatch(
            batchID: 1, operations: [PeerOperation(origin: "node\u{0}a", epoch: 1, sequence: 1, hlc: 1, operation: [1])])
        #expect(throws: CodecError.self) { try packed(batch) }
        var buffer = ByteBuffer(bytes: [9, 9])
        #expect(throws: CodecError.self) {
            try OperationBatchWriter.writeFrame(batchID: batch.batchID, operations: batch.operations, into: &buffer)
        }
        #expect(buffer == ByteBuffer(bytes: [9, 9]))
    }
}
