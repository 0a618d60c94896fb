import RegistryCore

/// A peer's batch, its operations decoded and checked as ``PeerOperation/decoded(using:)``
/// checks them.
public struct DecodedBatch: Equatable, Sendable {
    public let batchID: UInt64
    public let operations: [LoggedOperation]
}

extension OperationDecoder {
    /// The batch a `PeerFrame` payload holds, read straight from its bytes: each operation is
    /// decoded where it lies, with no protobuf-c message graph, which is most of what receiving a
    /// batch cost besides applying it (docs/performance.md, "Catching up from a peer"). The
    /// batch's bytes are copied once, for the operations to keep theirs
    /// (``LoggedOperation/encoded``).
    ///
    /// Nil when the frame is anything else: another body, a batch of more than `limit`
    /// operations, anything unusual in its shape (a field with the wrong wire type, the batch or
    /// an origin or an operation twice), or an operation ``PeerOperation/decoded(using:)`` would
    /// refuse. The caller then decodes the frame through ``PeerFrame/init(decoding:)``, whose
    /// rules and errors decide, as ``RegistrationOpReader`` leaves its unusual input to
    /// protobuf-c. On what it does read, the two agree (`OperationBatchReaderTests`).
    public mutating func batch(inFrame payload: UnsafeRawBufferPointer, limit: Int) -> DecodedBatch? {
        var frame = ProtobufReader(payload)
        var body: UnsafeRawBufferPointer?
        while !frame.isAtEnd {
            guard let key = frame.key() else { return nil }
            switch (key.field, key.type) {
            case (3, .lengthDelimited):
                guard body == nil, let bytes = frame.delimited() else { return nil }
                body = bytes
            case (1...6, _), (15, _):
                return nil
            default:
                guard frame.skip(key.type) else { return nil }
            }
        }
        guard let body else { return nil }
        // One copy of the batch, made at its first operation (a probe has none), which every
        // operation's ``LoggedOperation/encoded`` slices.
        var shared: [UInt8]?
        var reader = ProtobufReader(body)
        var batchID: UInt64 = 0
        var operations = [LoggedOperation]()
        // A registration takes well over 64 bytes of the batch; the array then grows at most once.
        operations.reserveCapacity(min(limit, body.count / 64 + 1))
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let value = reader.varint() else { return nil }
                batchID = value
            case (2, .lengthDelimited):
                guard operations.count < limit, let bytes = reader.delimited(), let bodyStart = body.baseAddress else { return nil }
                if shared == nil { shared = [UInt8](UnsafeBufferPointer(start: bodyStart.assumingMemoryBound(to: UInt8.self), count: body.count)) }
                guard let operation = peerOperation(bytes, in: shared!, at: bodyStart) else { return nil }
                operations.append(operation)
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return DecodedBatch(batchID: batchID, operations: operations)
    }

    /// One `PeerOperation`, decoded and checked; nil for anything unusual or refused. `bytes` lie
    /// in the batch, which `shared` holds a copy of from `bodyStart` on: the operation's
    /// ``LoggedOperation/encoded`` is a slice of it.
    private mutating func peerOperation(_ bytes: UnsafeRawBufferPointer, in shared: [UInt8], at bodyStart: UnsafeRawPointer) -> LoggedOperation? {
        var reader = ProtobufReader(bytes)
        var origin: NodeID?
        var epoch: UInt64 = 0
        var sequence: UInt64 = 0
        var hlc: UInt64 = 0
        var operation: Operation?
        var encoded: ArraySlice<UInt8>?
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard origin == nil, let text = reader.delimited(), let node = nodeID(text) else { return nil }
                origin = node
            case (2, .varint):
                guard let value = reader.varint() else { return nil }
                epoch = value
            case (3, .varint):
                guard let value = reader.varint() else { return nil }
                sequence = value
            case (4, .varint):
                guard let value = reader.varint() else { return nil }
                hlc = value
            case (5, .lengthDelimited):
                guard operation == nil, let body = reader.delimited(), let decoded = try? decode(body) else { return nil }
                operation = decoded
                let start = body.baseAddress.map { $0 - bodyStart } ?? 0
                encoded = shared[start..<start + body.count]
            case (1...5, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        guard let origin, let operation, epoch > 0, sequence > 0 else { return nil }
        return LoggedOperation(
            origin: origin, epoch: epoch, sequence: sequence, timestamp: HLCTimestamp(rawValue: hlc), operation: operation, encoded: encoded)
    }
}
