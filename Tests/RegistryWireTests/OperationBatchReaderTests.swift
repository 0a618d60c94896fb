import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``OperationDecoder/batch(inFrame:limit:)`` against protobuf-c's path, the oracle
/// (`PeerFrame(decoding:)`, then ``PeerOperation/decoded()`` for each operation): batches
/// protobuf-c packed are read, and read as that path reads them; a mutated one the reader reads
/// at all, it reads as that path does; what it leaves, that path decides.
@Suite struct OperationBatchReaderTests {
    /// Not a batch whose every operation decodes, by protobuf-c's path.
    struct NotADecodedBatch: Error {}

    func randomOperation(_ random: inout SplitMix64) throws -> Operation {
        switch random.next() % 8 {
        case 0: return .forget(ForgetOp(device: DeviceID(UUID128(high: random.next(), low: 2)), vendor: Vendor(trusted: "com.load7")))
        case 1:
            return .membership(
                MembershipOp(node: try NodeID("node-c"), address: "127.0.0.1:7000", removed: false, at: HLCTimestamp(rawValue: random.next() >> 8)))
        default: return .registration(try RegistrationOpReaderTests().randomOperation(&random))
        }
    }

    func randomBatch(_ random: inout SplitMix64) throws -> OperationBatch {
        let origins = ["node-a", "node-d31c2f65", "b-0"]
        let operations = try (0..<random.next() % 24).map { index in
            PeerOperation(
                LoggedOperation(
                    origin: NodeID(trusted: origins[Int(random.next() % 3)]), epoch: 1 + random.next() % 4, sequence: 1 + UInt64(index),
                    timestamp: HLCTimestamp(rawValue: random.next() >> (random.next() % 64)), operation: try randomOperation(&random)))
        }
        return OperationBatch(batchID: random.next() >> (random.next() % 64), operations: operations)
    }

    func packed(_ frame: PeerFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    func readDirectly(_ bytes: ByteBuffer, limit: Int = .max) -> DecodedBatch? {
        var decoder = OperationDecoder()
        return bytes.withUnsafeReadableBytes { decoder.batch(inFrame: $0, limit: limit) }
    }

    func readByProtobufC(_ bytes: ByteBuffer) throws -> DecodedBatch {
        guard case .batch(let batch) = try PeerFrame(decoding: bytes) else { throw NotADecodedBatch() }
        return DecodedBatch(batchID: batch.batchID, operations: try batch.operations.map { try $0.decoded() })
    }

    @Test func batchesProtobufCPackedReadAsProtobufCReadsThem() throws {
        var random = SplitMix64(seed: 61)
        var decoder = OperationDecoder()
        for _ in 0..<500 {
            let batch = try randomBatch(&random)
            let bytes = try packed(.batch(batch))
            let read = try #require(readDirectly(bytes))
            #expect(read == (try readByProtobufC(bytes)))
            #expect(read.batchID == batch.batchID && read.operations.count == batch.operations.count)
            // One decoder over many batches, as a session keeps, reads each as a fresh one does.
            #expect(bytes.withUnsafeReadableBytes { decoder.batch(inFrame: $0, limit: .max) } == read)
        }
    }

    @Test func otherFramesLongBatchesAndRefusedOperationsAreLeftToProtobufC() throws {
        var random = SplitMix64(seed: 62)
        var batch = try randomBatch(&random)
        while batch.operations.count < 3 { batch = try randomBatch(&random) }
        let bytes = try packed(.batch(batch))
        #expect(readDirectly(bytes, limit: batch.operations.count) != nil)
        #expect(readDirectly(bytes, limit: batch.operations.count - 1) == nil)

        let good = batch.operations[0]
        let refused: [PeerOperation] = [
            PeerOperation(origin: "NODE A", epoch: good.epoch, sequence: good.sequence, hlc: good.hlc, operation: good.operation),
            PeerOperation(origin: good.origin, epoch: 0, sequence: good.sequence, hlc: good.hlc, operation: good.operation),
            PeerOperation(origin: good.origin, epoch: good.epoch, sequence: 0, hlc: good.hlc, operation: good.operation),
            PeerOperation(origin: good.origin, epoch: good.epoch, sequence: good.sequence, hlc: good.hlc, operation: [0xFF, 0x01]),
            PeerOperation(origin: good.origin, epoch: good.epoch, sequence: good.sequence, hlc: good.hlc, operation: []),
        ]
        for operation in refused {
            let frame = try packed(.batch(OperationBatch(batchID: 9, operations: [good, operation])))
            #expect(readDirectly(frame) == nil, "\(operation)")
            #expect(throws: CodecError.self) { try readByProtobufC(frame) }
        }
        let others: [PeerFrame] = [
            .hello(PeerHello(clusterID: "c", nodeID: "node-a", epoch: 3, versionVector: [], mintingKeyFingerprint: 1)),
            .ack(BatchAck(batchID: 77, held: [])),
            .refusal(WireError(code: .wrongCluster, message: "no", retryable: false)),
        ]
        for frame in others { #expect(readDirectly(try packed(frame)) == nil, "\(frame)") }
        #expect(readDirectly(ByteBuffer()) == nil)
        // The batch twice in one frame (protobuf would merge them) is left too.
        var twice = bytes
        twice.writeImmutableBuffer(bytes)
        #expect(readDirectly(twice) == nil)
        // An empty batch is a probe, and read.
        #expect(readDirectly(try packed(.batch(OperationBatch(batchID: 4, operations: [])))) == DecodedBatch(batchID: 4, operations: []))
    }

    /// Each operation keeps its bytes as the frame carried them (what the journal writes), by
    /// either path, a field this version does not know included.
    @Test func operationsKeepTheirBytesAsTheFrameCarriedThem() throws {
        var random = SplitMix64(seed: 64)
        for round in 0..<200 {
            var batch = try randomBatch(&random)
            if round % 2 == 0, !batch.operations.isEmpty {
                // Field 15 of `Operation`, a varint this version does not have.
                let first = batch.operations[0]
                batch.operations[0] = PeerOperation(
                    origin: first.origin, epoch: first.epoch, sequence: first.sequence, hlc: first.hlc,
                    operation: first.operation + [0x78, 0x2A])
            }
            let bytes = try packed(.batch(batch))
            let direct = try #require(readDirectly(bytes))
            let byProtobufC = try readByProtobufC(bytes)
            #expect(direct == byProtobufC)
            for (index, sent) in batch.operations.enumerated() {
                #expect(direct.operations[index].encoded.map(Array.init) == Array(sent.operation))
                #expect(byProtobufC.operations[index].encoded.map(Array.init) == Array(sent.operation))
            }
        }
    }

    /// A batch as read, with the bytes each operation keeps (``LoggedOperation/encoded``, which
    /// equality leaves out): what the journal writes.
    struct ReadWithBytes: Equatable {
        let batch: DecodedBatch
        let bytes: [[UInt8]?]
        init(_ batch: DecodedBatch) {
            self.batch = batch
            bytes = batch.operations.map { $0.encoded.map { Array($0) } }
        }
    }

    @Test func aMutatedBatchItReadsItReadsAsProtobufCDoes() throws {
        try MutatedFrames.expectAgreement(
            seed: 63, frame: { try packed(.batch(try randomBatch(&$0))) }, direct: { readDirectly($0).map(ReadWithBytes.init) },
            protobufC: { ReadWithBytes(try readByProtobufC($0)) })
    }
}
