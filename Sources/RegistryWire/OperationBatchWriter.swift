import NIOCore
import RegistryCore

/// Writes a length-prefixed `PeerFrame` holding an `OperationBatch` directly
/// (``ProtobufWriter``): a node sends every operation to every peer, and building a protobuf-c
/// message graph for each (a C copy of its origin and of its bytes), then sizing and packing it
/// through protobuf-c's descriptors, cost more than the operation's own bytes. The bytes are the
/// ones protobuf-c packs, field for field (`OperationBatchWriterTests` compares them over seeded
/// random batches); ``OperationDecoder/batch(inFrame:limit:)`` reads them the same way back.
public enum OperationBatchWriter {
    /// Appends the frame of `PeerFrame.batch(OperationBatch(batchID:operations:))` to `buffer`.
    /// Throws, leaving `buffer` as it was, when an origin holds a NUL, which a protobuf-c string
    /// field cannot carry (``PeerFrame/encodeFrame(into:)`` refuses it alike).
    ///
    /// The operations are read where they lie in the array (`operations[index]`): a loop variable
    /// would copy each one, retaining and releasing its origin and its bytes.
    public static func writeFrame(batchID: UInt64, operations: [PeerOperation], into buffer: inout ByteBuffer) throws(CodecError) {
        var batchBytes = ProtobufWriter.uint64Size(Field.batchID, batchID)
        for index in operations.indices {
            if operations[index].origin.containsNUL {
                throw .invalidField(
                    "\(operations[index].origin.debugDescription) holds a NUL byte, which a protobuf-c string field cannot carry")
            }
            batchBytes += ProtobufWriter.delimitedSize(Field.operations, length: size(operations[index]))
        }
        let frameBytes = ProtobufWriter.delimitedSize(Field.batch, length: batchBytes)
        buffer.writeInteger(UInt32(frameBytes), endianness: .big)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: frameBytes) { out in
            let start = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var writer = ProtobufWriter(at: start)
            writer.header(Field.batch, length: batchBytes)
            writer.uint64(Field.batchID, batchID)
            for index in operations.indices {
                writer.header(Field.operations, length: size(operations[index]))
                writer.string(Field.origin, operations[index].origin)
                writer.uint64(Field.epoch, operations[index].epoch)
                writer.uint64(Field.sequence, operations[index].sequence)
                writer.uint64(Field.hlc, operations[index].hlc)
                operations[index].operation.withUnsafeBufferPointer { writer.bytes(Field.operation, $0) }
            }
            precondition(writer.cursor == start + frameBytes, "a batch frame's size was misjudged")
            return frameBytes
        }
    }

    /// The encoded size of one `PeerOperation`.
    private static func size(_ operation: PeerOperation) -> Int {
        ProtobufWriter.stringSize(Field.origin, operation.origin) + ProtobufWriter.uint64Size(Field.epoch, operation.epoch)
            + ProtobufWriter.uint64Size(Field.sequence, operation.sequence) + ProtobufWriter.uint64Size(Field.hlc, operation.hlc)
            + (operation.operation.isEmpty ? 0 : ProtobufWriter.delimitedSize(Field.operation, length: operation.operation.count))
    }

    /// Field numbers, from `Protos/registry/v1/peer.proto`.
    private enum Field {
        /// `PeerFrame`.
        static let batch: UInt64 = 3
        /// `OperationBatch`.
        static let batchID: UInt64 = 1, operations: UInt64 = 2
        /// `PeerOperation`.
        static let origin: UInt64 = 1, epoch: UInt64 = 2, sequence: UInt64 = 3, hlc: UInt64 = 4, operation: UInt64 = 5
    }
}
