import NIOCore
import RegistryCore

/// Decodes many operations in turn, such as a start-up's replay of the journal: the same as
/// ``OperationCodec/decode(_:)-(UnsafeRawBufferPointer)`` for each, but it remembers the origins,
/// vendors and bundle IDs of the registrations it read, which such a run mostly repeats, instead
/// of making and validating each one again.
public struct OperationDecoder {
    private var registrations: RegistrationOpReader
    /// The origin of the operations last decoded: a peer's batch names one for each operation.
    private var origins = TextMemo<NodeID>(slots: 1)

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

    /// The operation `bytes` hold (an array, or a slice of one), or the codec's error.
    public mutating func decode(_ bytes: some RandomAccessCollection<UInt8>) throws(CodecError) -> Operation {
        let decoded = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(CodecError) in try decode(UnsafeRawBufferPointer(buffer)) }
        }
        return try (decoded ?? Array(bytes).withUnsafeBytes { raw in Result { () throws(CodecError) in try decode(raw) } }).get()
    }

    /// The node ID `text` names, checked; the last one is remembered, as a peer's batch names one
    /// origin for each of its operations.
    mutating func nodeID(_ text: String) throws(NodeID.Invalid) -> NodeID {
        var utf8 = text
        if let node = utf8.withUTF8({ nodeID(UnsafeRawBufferPointer($0)) }) { return node }
        return try NodeID(text)
    }

    /// The node ID the UTF-8 `bytes` name, checked and remembered as above; nil when invalid.
    mutating func nodeID(_ bytes: UnsafeRawBufferPointer) -> NodeID? {
        origins.value(bytes, make: { try? NodeID($0) })
    }
}
