/// Protobuf wire bytes written by hand, field by field: independent of protobuf-c, and able to
/// carry what protobuf-c cannot pack (a string holding NUL).
public struct ProtoBytes: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    private mutating func appendVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    public func varint(_ field: UInt64, _ value: UInt64) -> ProtoBytes {
        var copy = self
        copy.appendVarint(field << 3)
        copy.appendVarint(value)
        return copy
    }

    public func bytes(_ field: UInt64, _ payload: [UInt8]) -> ProtoBytes {
        var copy = self
        copy.appendVarint(field << 3 | 2)
        copy.appendVarint(UInt64(payload.count))
        copy.bytes += payload
        return copy
    }

    public func string(_ field: UInt64, _ text: String) -> ProtoBytes { bytes(field, Array(text.utf8)) }
    public func message(_ field: UInt64, _ message: ProtoBytes) -> ProtoBytes { bytes(field, message.bytes) }
    public func bytes(_ other: ProtoBytes) -> ProtoBytes {
        var copy = self
        copy.bytes += other.bytes
        return copy
    }

    /// With the 4-byte big-endian length prefix.
    public var framed: [UInt8] {
        let length = UInt32(bytes.count)
        return [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)] + bytes
    }
}
