/// The cluster's key for minting device IDs. Every node of a cluster must hold the same one:
/// nodes exchange its ``fingerprint`` in the peer handshake and refuse a peer whose differs,
/// because two keys would mint two IDs for one first install.
///
/// It is derived from a secret text (`--cluster-secret`). Without the secret, whoever knows an
/// IDFV could compute the device ID it mints; with it, IDs reveal nothing.
public struct MintingKey: Equatable, Sendable {
    let k0: UInt64
    let k1: UInt64

    /// The key of `secret`: SipHash-128 of its UTF-8 bytes under a fixed, public key, so any
    /// text serves and every node derives the same key from it.
    public init(secret: String) {
        var hasher = SipHash128(k0: 0x7265_6769_7374_7279, k1: 0x6d69_6e74_696e_676b)
        hasher.combine(secret.utf8)
        (k0, k1) = hasher.finalize()
    }

    /// Names the key without revealing it: a hash of the key under itself, for handshakes.
    public var fingerprint: UInt64 {
        var hasher = SipHash128(k0: k0, k1: k1)
        hasher.combine(Array("fingerprint".utf8))
        return hasher.finalize().first
    }
}

extension DeviceID {
    /// The device ID that a first install presenting `idfv` in `vendor` gets, the same on every
    /// node with `key`: SipHash-128 of (vendor's UTF-8, a 0 byte, the IDFV's 16 bytes,
    /// generation as 4 bytes little-endian), the two output words as a UUIDv8 (RFC 9562
    /// section 5.8). Two sibling apps of a new phone that register at the same moment through
    /// two nodes present the same IDFV, so both get this ID and no merge is needed.
    ///
    /// `generation` is the claim generation of the IDFV (``Identifier/atGeneration(_:)``): 0
    /// until a device that claimed it is forgotten, so that a re-registration after a forget
    /// gets a fresh ID. A new IDFV (after every app of the vendor was removed) mints a new one.
    public static func minted(vendor: Vendor, idfv: UUID128, generation: UInt32 = 0, key: MintingKey) -> DeviceID {
        minted(vendor: vendor, kindByte: 0, value: idfv, generation: generation, key: key)
    }

    /// As ``minted(vendor:idfv:generation:key:)``, for a first install that presents no IDFV
    /// (before the first unlock after a reboot, iOS gives none): the same rule with a 1 byte in
    /// place of the 0 and the keychain UUID's 16 bytes, so sibling apps that present only the
    /// shared keychain UUID through two nodes at once also get one ID, and no keychain-minted ID
    /// can equal an IDFV-minted one.
    public static func minted(vendor: Vendor, keychain: UUID128, generation: UInt32 = 0, key: MintingKey) -> DeviceID {
        minted(vendor: vendor, kindByte: 1, value: keychain, generation: generation, key: key)
    }

    private static func minted(vendor: Vendor, kindByte: UInt8, value: UUID128, generation: UInt32, key: MintingKey) -> DeviceID {
        var hasher = SipHash128(k0: key.k0, k1: key.k1)
        hasher.combine(vendor.text.utf8)
        hasher.combine(kindByte)
        // The UUID's 16 bytes in UUID order (each word's most significant byte first), then the
        // generation's 4 bytes little-endian.
        hasher.combine(littleEndianBytesOf: value.high.byteSwapped)
        hasher.combine(littleEndianBytesOf: value.low.byteSwapped)
        for shift in stride(from: UInt32(0), to: 32, by: 8) { hasher.combine(UInt8(truncatingIfNeeded: generation >> shift)) }
        let (first, second) = hasher.finalize()
        let high = first & ~0xF000 | 0x8000
        let low = second & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        return DeviceID(UUID128(high: high, low: low))
    }

    /// The ID for a device that `registration` creates at `timestamp`: ``minted(vendor:idfv:generation:key:)``
    /// when it presents an IDFV, else ``minted(vendor:keychain:generation:key:)`` when it presents
    /// a keychain UUID, otherwise (a kind of identifier added later) a random UUIDv7 from
    /// `generator`. `generation` is that identifier's claim generation.
    public static func new(
        for registration: Registration, at timestamp: HLCTimestamp, generation: UInt32 = 0, key: MintingKey,
        using generator: inout some RandomNumberGenerator
    ) -> DeviceID {
        if let idfv = registration.identifiers.first(where: { $0.kind == .idfv }) {
            return minted(vendor: registration.vendor, idfv: idfv.value, generation: generation, key: key)
        }
        if let keychain = registration.identifiers.first(where: { $0.kind == .keychain }) {
            return minted(vendor: registration.vendor, keychain: keychain.value, generation: generation, key: key)
        }
        return mint(at: timestamp, using: &generator)
    }
}
