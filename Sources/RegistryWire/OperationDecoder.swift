import NIOCore
import RegistryCore

/// Decodes many operations in turn, such as a start-up's replay of the journal: the same as
/// ``OperationCodec/decode(_:)-(UnsafeRawBufferPointer)`` for each, but it remembers the origins,
/// vendors and bundle IDs of the registrations it read, which such a run mostly repeats, instead
/// of making and validating each one again.
public struct OperationDecoder {
    private var registrations: RegistrationOpReader

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
}
