import CProtobufC
import CRegistryProto
import NIOCore
import RegistryCore

extension PeerFrame {
    /// Decodes one frame payload; throws ``CodecError/malformed(message:bytes:)`` for bytes that
    /// are not a PeerFrame. An unknown or missing body decodes as `.unknown`.
    public init(decoding payload: ByteBuffer) throws(CodecError) {
        self = try ProtobufC.withUnpacked(payload, name: "registry.v1.PeerFrame", unpack: registry__v1__peer_frame__unpack) {
            (frame: Registry__V1__PeerFrame) throws(CodecError) -> PeerFrame in try Self.body(of: frame)
        }
    }

    private static func body(of frame: Registry__V1__PeerFrame) throws(CodecError) -> PeerFrame {
        switch frame.body_case {
        case REGISTRY__V1__PEER_FRAME__BODY_HELLO:
            guard let hello = frame.hello?.pointee else { return .unknown }
            return .hello(
                PeerHello(
                    clusterID: CRead.string(hello.cluster_id), nodeID: CRead.string(hello.node_id), epoch: hello.epoch,
                    version: CRead.version(hello.version),
                    versionVector: try CRead.positions(hello.n_version_vector, hello.version_vector),
                    mintingKeyFingerprint: hello.minting_key_fingerprint, proof: CRead.bytes(hello.proof), challenge: hello.challenge,
                    vendorRulesFingerprint: hello.vendor_rules_fingerprint, deviceRecords: hello.device_records, claims: hello.claims))
        case REGISTRY__V1__PEER_FRAME__BODY_WELCOME:
            guard let welcome = frame.welcome?.pointee else { return .unknown }
            return .welcome(
                PeerWelcome(
                    nodeID: CRead.string(welcome.node_id), epoch: welcome.epoch,
                    versionVector: try CRead.positions(welcome.n_version_vector, welcome.version_vector),
                    maxBatchOperations: welcome.max_batch_operations, proof: CRead.bytes(welcome.proof), version: CRead.version(welcome.version)))
        case REGISTRY__V1__PEER_FRAME__BODY_BATCH:
            guard let batch = frame.batch?.pointee else { return .unknown }
            return .batch(
                OperationBatch(
                    batchID: batch.batch_id,
                    operations: try CRead.messages(batch.n_operations, batch.operations) { operation in
                        PeerOperation(
                            origin: CRead.string(operation.origin), epoch: operation.epoch, sequence: operation.sequence,
                            hlc: operation.hlc, operation: CRead.bytes(operation.operation)[...])
                    }))
        case REGISTRY__V1__PEER_FRAME__BODY_ACK:
            guard let ack = frame.ack?.pointee else { return .unknown }
            return .ack(BatchAck(batchID: ack.batch_id, held: try CRead.positions(ack.n_held, ack.held)))
        case REGISTRY__V1__PEER_FRAME__BODY_SNAPSHOT_CHUNK:
            guard let chunk = frame.snapshot_chunk?.pointee else { return .unknown }
            return .snapshotChunk(
                SnapshotChunk(transferID: chunk.transfer_id, offset: chunk.offset, totalBytes: chunk.total_bytes, data: CRead.bytes(chunk.data)))
        case REGISTRY__V1__PEER_FRAME__BODY_SNAPSHOT_ACK:
            guard let ack = frame.snapshot_ack?.pointee else { return .unknown }
            return .snapshotAck(
                SnapshotAck(
                    transferID: ack.transfer_id, receivedBytes: ack.received_bytes, installed: ack.installed != 0,
                    held: try CRead.positions(ack.n_held, ack.held)))
        case REGISTRY__V1__PEER_FRAME__BODY_REFUSAL:
            guard let refusal = frame.refusal?.pointee else { return .unknown }
            return .refusal(CRead.error(refusal))
        default:
            return .unknown
        }
    }

    /// Appends this frame as protobuf bytes (no length prefix) to `buffer`.
    public func encode(into buffer: inout ByteBuffer) throws(CodecError) {
        let arena = CArena()
        var frame = Registry__V1__PeerFrame()
        registry__v1__peer_frame__init(&frame)
        switch self {
        case .hello(let hello):
            var message = Registry__V1__PeerHello()
            registry__v1__peer_hello__init(&message)
            message.cluster_id = arena.string(hello.clusterID)
            message.node_id = arena.string(hello.nodeID)
            message.epoch = hello.epoch
            message.version = arena.version(hello.version)
            (message.n_version_vector, message.version_vector) = arena.positions(hello.versionVector)
            message.minting_key_fingerprint = hello.mintingKeyFingerprint
            message.proof = arena.bytes(hello.proof)
            message.challenge = hello.challenge
            message.vendor_rules_fingerprint = hello.vendorRulesFingerprint
            message.device_records = hello.deviceRecords
            message.claims = hello.claims
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_HELLO
            frame.hello = arena.new(message)
        case .welcome(let welcome):
            var message = Registry__V1__PeerWelcome()
            registry__v1__peer_welcome__init(&message)
            message.node_id = arena.string(welcome.nodeID)
            message.epoch = welcome.epoch
            (message.n_version_vector, message.version_vector) = arena.positions(welcome.versionVector)
            message.max_batch_operations = welcome.maxBatchOperations
            message.proof = arena.bytes(welcome.proof)
            message.version = arena.version(welcome.version)
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_WELCOME
            frame.welcome = arena.new(message)
        case .batch(let batch):
            var message = Registry__V1__OperationBatch()
            registry__v1__operation_batch__init(&message)
            message.batch_id = batch.batchID
            message.n_operations = batch.operations.count
            message.operations = arena.array(count: batch.operations.count) { index in
                let operation = batch.operations[index]
                var item = Registry__V1__PeerOperation()
                registry__v1__peer_operation__init(&item)
                item.origin = arena.string(operation.origin)
                item.epoch = operation.epoch
                item.sequence = operation.sequence
                item.hlc = operation.hlc
                item.operation = arena.bytes(operation.operation)
                return arena.new(item)
            }
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_BATCH
            frame.batch = arena.new(message)
        case .ack(let ack):
            var message = Registry__V1__BatchAck()
            registry__v1__batch_ack__init(&message)
            message.batch_id = ack.batchID
            (message.n_held, message.held) = arena.positions(ack.held)
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_ACK
            frame.ack = arena.new(message)
        case .snapshotChunk(let chunk):
            var message = Registry__V1__SnapshotChunk()
            registry__v1__snapshot_chunk__init(&message)
            message.transfer_id = chunk.transferID
            message.offset = chunk.offset
            message.total_bytes = chunk.totalBytes
            message.data = arena.bytes(chunk.data)
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_SNAPSHOT_CHUNK
            frame.snapshot_chunk = arena.new(message)
        case .snapshotAck(let ack):
            var message = Registry__V1__SnapshotAck()
            registry__v1__snapshot_ack__init(&message)
            message.transfer_id = ack.transferID
            message.received_bytes = ack.receivedBytes
            message.installed = ack.installed ? 1 : 0
            (message.n_held, message.held) = arena.positions(ack.held)
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_SNAPSHOT_ACK
            frame.snapshot_ack = arena.new(message)
        case .refusal(let error):
            frame.body_case = REGISTRY__V1__PEER_FRAME__BODY_REFUSAL
            frame.refusal = arena.error(error)
        case .unknown:
            break
        }
        try arena.refuseTextWithNUL()
        try withExtendedLifetime(arena) { () throws(CodecError) in
            try ProtobufC.pack(&frame, into: &buffer)
        }
    }

    /// This frame with its length prefix.
    public func encodeFrame(into buffer: inout ByteBuffer) throws(CodecError) {
        try buffer.writeFrame { (buffer) throws(CodecError) in try encode(into: &buffer) }
    }
}
