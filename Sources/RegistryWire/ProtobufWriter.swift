import RegistryCore

/// Writes protobuf's wire format through a pointer into memory the caller has sized: tags,
/// varints and length-delimited fields. It checks nothing; the caller computes every length
/// first with the `size` functions, which mirror the writes one for one.
///
/// Proto3 rules as protobuf-c applies them: a scalar, string or bytes field equal to its
/// default (0 or empty) is left out; a sub-message that is present is written even when empty.
struct ProtobufWriter {
    private(set) var cursor: UnsafeMutablePointer<UInt8>

    init(at start: UnsafeMutablePointer<UInt8>) {
        cursor = start
    }

    /// The wire types this project writes.
    enum WireType: UInt64 {
        case varint = 0
        case lengthDelimited = 2
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            cursor.pointee = UInt8(truncatingIfNeeded: value) | 0x80
            cursor += 1
            value >>= 7
        }
        cursor.pointee = UInt8(value)
        cursor += 1
    }

    mutating func tag(_ field: UInt64, _ type: WireType) {
        varint(field << 3 | type.rawValue)
    }

    /// A `uint64` field, left out when 0.
    mutating func uint64(_ field: UInt64, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .varint)
        varint(value)
    }

    /// An `int32` or enum field, left out when 0 (a negative value takes ten bytes, as
    /// protobuf sign-extends it to 64 bits).
    mutating func int32(_ field: UInt64, _ value: Int32) {
        uint64(field, UInt64(bitPattern: Int64(value)))
    }

    /// The tag and length of a sub-message (or other length-delimited field) whose `length`
    /// bytes the caller writes next.
    mutating func header(_ field: UInt64, length: Int) {
        tag(field, .lengthDelimited)
        varint(UInt64(length))
    }

    /// A `string` field, left out when empty.
    mutating func string(_ field: UInt64, _ value: String) {
        var value = value
        value.withUTF8 { bytes(field, $0) }
    }

    /// A `string` field holding an interned text's bytes, left out when empty: no `String` is
    /// read, so a long name is not retained.
    mutating func string(_ field: UInt64, _ text: InternedText) {
        bytes(field, text.utf8)
    }

    /// A `string` field holding `text`, left out when empty.
    mutating func string(_ field: UInt64, _ text: UUIDText) {
        let count = text.utf8Count
        guard count > 0 else { return }
        header(field, length: count)
        text.writeUTF8(to: cursor)
        cursor += count
    }

    /// One element of a `repeated string` field: written even when empty, as every element is.
    mutating func element(_ field: UInt64, _ value: String) {
        var value = value
        value.withUTF8 { bytes in
            header(field, length: bytes.count)
            if let base = bytes.baseAddress, bytes.count > 0 {
                cursor.update(from: base, count: bytes.count)
                cursor += bytes.count
            }
        }
    }

    /// A 16-byte `bytes` field holding a UUID, big-endian.
    mutating func uuid(_ field: UInt64, _ value: UUID128) {
        header(field, length: 16)
        UnsafeMutableRawPointer(cursor).storeBytes(of: value.high.bigEndian, as: UInt64.self)
        UnsafeMutableRawPointer(cursor + 8).storeBytes(of: value.low.bigEndian, as: UInt64.self)
        cursor += 16
    }

    /// A `bytes` or `string` field, left out when empty.
    mutating func bytes(_ field: UInt64, _ value: UnsafeBufferPointer<UInt8>) {
        guard let base = value.baseAddress, value.count > 0 else { return }
        header(field, length: value.count)
        cursor.update(from: base, count: value.count)
        cursor += value.count
    }

    static func varintSize(_ value: UInt64) -> Int {
        // One byte per started group of 7 bits; 0 takes one byte.
        (64 - (value | 1).leadingZeroBitCount + 6) / 7
    }

    static func tagSize(_ field: UInt64) -> Int {
        varintSize(field << 3)
    }

    static func uint64Size(_ field: UInt64, _ value: UInt64) -> Int {
        value == 0 ? 0 : tagSize(field) + varintSize(value)
    }

    static func int32Size(_ field: UInt64, _ value: Int32) -> Int {
        uint64Size(field, UInt64(bitPattern: Int64(value)))
    }

    /// A length-delimited field of `length` bytes, header included.
    static func delimitedSize(_ field: UInt64, length: Int) -> Int {
        tagSize(field) + varintSize(UInt64(length)) + length
    }

    static func stringSize(_ field: UInt64, _ value: String) -> Int {
        let count = value.utf8.count
        return count == 0 ? 0 : delimitedSize(field, length: count)
    }

    static func stringSize(_ field: UInt64, _ text: InternedText) -> Int {
        let count = text.utf8.count
        return count == 0 ? 0 : delimitedSize(field, length: count)
    }

    static func stringSize(_ field: UInt64, _ text: UUIDText) -> Int {
        let count = text.utf8Count
        return count == 0 ? 0 : delimitedSize(field, length: count)
    }

    /// One element of a `repeated string` field, header included (an empty one too).
    static func elementSize(_ field: UInt64, _ value: String) -> Int {
        delimitedSize(field, length: value.utf8.count)
    }

    /// A 16-byte `bytes` field, header included.
    static func uuidSize(_ field: UInt64) -> Int {
        delimitedSize(field, length: 16)
    }
}
