import NIOCore
import RegistryCore

/// Decodes many operations in turn, such as a start-up's replay of the journal: the same as
/// ``OperationCodec/decode(_:)-(UnsafeRawBufferPointer)`` for each, but it remembers the origins,
/// vendors and bundle IDs of the registrations it read, which such a run mostly repeats, instead
/// of making and validating each one again.
public struct OperationDecoder {
    private var registrations: RegistrationOpReader
    private var lastOrigin: NodeID?

    /// A decoder for a long run of operations.
    public init() {
        self.init(remembering: 1024)
    }

    /// A decoder that remembers about `texts` bundle IDs and vendors (1: the last of each, which
    /// allocates nothing, for one operation).
    init(remembering texts: Int) {
        registrations = RegistrationOpReader(remembering: texts)
    }

    /// The operation `bytes` hold, or the codec's error.
    public mutating func decode(_ bytes: UnsafeRawBufferPointer) throws(CodecError) -> Operation {
        if let registration = registrations.operation(bytes) { return registration }
        return try OperationCodec.decodedByProtobufC(ByteBuffer(bytes: bytes))
    }

    /// The operation `bytes` hold, or the codec's error.
    public mutating func decode(_ bytes: [UInt8]) throws(CodecError) -> Operation {
        let decoded = bytes.withUnsafeBytes { raw in Result { () throws(CodecError) in try decode(raw) } }
        return try decoded.get()
    }

    /// The node ID `text` names, checked; the last one is remembered, as a peer's batch names one
    /// origin for each of its operations.
    mutating func nodeID(_ text: String) throws(NodeID.Invalid) -> NodeID {
        if let lastOrigin, lastOrigin.value == text { return lastOrigin }
        let node = try NodeID(text)
        lastOrigin = node
        return node
    }
}
