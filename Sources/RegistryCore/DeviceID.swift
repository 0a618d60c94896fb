/// The registry's 128-bit device identifier, minted by a node and printed as RFC 9562 UUID text.
public struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let uuid: UUID128

    public init(_ uuid: UUID128) {
        self.uuid = uuid
    }

    /// Parses device ID text; throws ``IdentityError/invalidDeviceID(_:)`` for anything but UUID text.
    public init(parsing text: String) throws(IdentityError) {
        guard let uuid = UUID128(text: text) else { throw .invalidDeviceID(text) }
        self.uuid = uuid
    }

    /// Mints a UUIDv7 (RFC 9562 section 5.7): 48 bits of Unix milliseconds from `timestamp`,
    /// then 74 random bits from `generator`. Time-ordered IDs keep storage inserts local.
    public static func mint(at timestamp: HLCTimestamp, using generator: inout some RandomNumberGenerator) -> DeviceID {
        let randA = generator.next() & 0x0FFF
        let randB = generator.next() & 0x3FFF_FFFF_FFFF_FFFF
        let high = (timestamp.millis << 16) | 0x7000 | randA
        let low = 0x8000_0000_0000_0000 | randB
        return DeviceID(UUID128(high: high, low: low))
    }

    public var description: String { uuid.text }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool { lhs.uuid < rhs.uuid }
}
