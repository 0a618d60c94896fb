extension Identifier {
    /// The claim key of this identifier in claim generation `generation`.
    ///
    /// Generation 0 is the identifier itself. When the device that owns an identifier's claim is
    /// forgotten, the claim is released but not removed (a late operation must still find it),
    /// so the next registration that presents the identifier claims generation 1, and so on.
    /// Generation `g > 0` is a derived value of the same kind: SipHash-128 under a fixed, public
    /// key of the value's 16 bytes and `g` as 4 bytes little-endian. Every node derives the same
    /// value, so a registration operation carries its claims as plain identifiers and a replica
    /// applies it without knowing about generations. The value being derived from a keyed hash
    /// already, no key is needed to keep it secret.
    public func atGeneration(_ generation: UInt32) -> Identifier {
        guard generation > 0 else { return self }
        var hasher = SipHash128(k0: 0x636C_6169_6D2D_6765, k1: 0x6E65_7261_7469_6F6E)
        for word in [value.high, value.low] {
            for shift in stride(from: UInt64(56), through: 0, by: -8) { hasher.combine(UInt8(truncatingIfNeeded: word >> shift)) }
        }
        for shift in stride(from: UInt32(0), to: 32, by: 8) { hasher.combine(UInt8(truncatingIfNeeded: generation >> shift)) }
        let (high, low) = hasher.finalize()
        return Identifier(kind: kind, value: UUID128(high: high, low: low))
    }
}
