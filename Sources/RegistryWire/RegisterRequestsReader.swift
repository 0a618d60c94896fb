import RegistryCore

/// Decodes registration frames, `ClientFrame`s whose body is a `RegisterRequest` or a
/// `RegisterBatchRequest`, without protobuf-c: they are nearly every frame a node reads, and
/// protobuf-c's generic unpacking and the copy out of its message graph were a tenth of a batched
/// registration's CPU.
///
/// It reads the usual shape only, as ``WatchEventsReader`` does: a field the schema does not have
/// is skipped, and anything else unusual (another body, a write concern or a causal token, a
/// sub-message twice, a wire type other than the field's, a length past the end) gives nil, and
/// ``ClientFrame/init(decoding:)`` hands the frame to protobuf-c, whose rules decide
/// (`RegisterRequestsReaderTests` compares the two over seeded random frames and mutations).
enum RegisterRequestsReader {
    /// The frame `bytes` holds, or nil when protobuf-c is to decode it.
    static func frame(_ bytes: UnsafeRawBufferPointer) -> ClientFrame? {
        var reader = ProtobufReader(bytes)
        var requestID: UInt64 = 0
        var body: ClientBody?
        var bundles = RepeatedText()
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let value = reader.varint() else { return nil }
                requestID = value
            case (3, .lengthDelimited):
                guard body == nil, let message = reader.delimited(), let request = registerRequest(message, &bundles) else { return nil }
                body = .register(request)
            case (4, .lengthDelimited):
                guard body == nil, let message = reader.delimited(), let batch = registerBatch(message, &bundles) else { return nil }
                body = .registerBatch(batch)
            default:
                return nil
            }
        }
        guard let body else { return nil }
        return ClientFrame(requestID: requestID, body: body)
    }

    private static func registerBatch(_ bytes: UnsafeRawBufferPointer, _ bundles: inout RepeatedText) -> [RegisterRequest]? {
        var reader = ProtobufReader(bytes)
        var requests = [RegisterRequest]()
        // Counted first, as protobuf-c does, so that the array is made once.
        var counting = ProtobufReader(bytes)
        var count = 0
        while !counting.isAtEnd, let key = counting.key(), counting.skip(key.type) { count += key.field == 1 ? 1 : 0 }
        requests.reserveCapacity(count)
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard let message = reader.delimited(), let request = registerRequest(message, &bundles) else { return nil }
                requests.append(request)
            case (1, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return requests
    }

    private static func registerRequest(_ bytes: UnsafeRawBufferPointer, _ bundles: inout RepeatedText) -> RegisterRequest? {
        var reader = ProtobufReader(bytes)
        var bundleID = ""
        var identifiers = [PresentedIdentifier]()
        identifiers.reserveCapacity(2)
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                bundleID = bundles.string(text)
            case (2, .lengthDelimited):
                guard let message = reader.delimited(), let identifier = identifier(message) else { return nil }
                identifiers.append(identifier)
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return RegisterRequest(bundleID: bundleID, identifiers: identifiers)
    }

    private static func identifier(_ bytes: UnsafeRawBufferPointer) -> PresentedIdentifier? {
        var reader = ProtobufReader(bytes)
        var kind: UInt64 = 0
        var value = UUIDText("")
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let raw = reader.varint() else { return nil }
                kind = raw
            case (2, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                value = UUIDText(utf8: text.assumingMemoryBound(to: UInt8.self))
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return PresentedIdentifier(rawKind: Int32(truncatingIfNeeded: kind), value: value)
    }
}
