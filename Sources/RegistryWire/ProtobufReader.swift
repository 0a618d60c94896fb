/// Reads protobuf's wire format from memory the caller holds: keys, varints and length-delimited
/// fields, and skips fields it is not asked about. Every read is bounds-checked. It never
/// decides that input is malformed: a read that finds anything unusual gives nil, and the
/// caller hands the whole message to protobuf-c, whose rules then decide (see
/// ``WatchEventsReader``).
struct ProtobufReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var isAtEnd: Bool { offset >= bytes.count }

    /// The wire types protobuf defines that this reader reads or skips.
    enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    /// The next field's number and wire type; nil for field number 0, a key longer than 5
    /// bytes, or a wire type this reader does not know (groups).
    mutating func key() -> (field: UInt32, type: WireType)? {
        guard let key = varint(maxBytes: 5), key <= UInt64(UInt32.max), key >> 3 != 0,
            let type = WireType(rawValue: UInt8(key & 7))
        else { return nil }
        return (UInt32(key >> 3), type)
    }

    /// A varint of at most 10 bytes whose bits fit in 64; nil otherwise, or when cut short.
    mutating func varint(maxBytes: Int = 10) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        for index in 0..<maxBytes {
            guard offset < bytes.count else { return nil }
            let byte = bytes[offset]
            offset += 1
            if index == 9, byte > 1 { return nil }
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }

    /// A length-delimited field's bytes; nil when its length runs past the end.
    mutating func delimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
        let start = offset
        offset += Int(length)
        return UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
    }

    /// Skips a field of `type`; false when it runs past the end.
    mutating func skip(_ type: WireType) -> Bool {
        switch type {
        case .varint: return varint() != nil
        case .lengthDelimited: return delimited() != nil
        case .fixed64, .fixed32:
            let size = type == .fixed64 ? 8 : 4
            guard bytes.count - offset >= size else { return false }
            offset += size
            return true
        }
    }
}
