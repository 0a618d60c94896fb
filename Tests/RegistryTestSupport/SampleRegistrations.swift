import RegistryCore

/// Seeded registrations that make every kind of state change: sibling apps of two vendors,
/// reinstalls, and merges, from identifiers drawn out of a small pool (an IDFV each time, a
/// keychain UUID every other time). The same seed gives the same registrations and minted IDs.
public struct SampleRegistrations {
    private var generator: SplitMix64
    private let pool: [UUID128]
    private let rules: VendorRules

    /// Registrations over `poolSize` identifiers.
    public init(seed: UInt64, poolSize: Int) throws {
        generator = SplitMix64(seed: seed)
        var drawn = [UUID128]()
        for _ in 0..<poolSize { drawn.append(UUID128(high: generator.next() | 1, low: generator.next())) }
        pool = drawn
        rules = try VendorRules()
    }

    /// The next registration.
    public mutating func next() throws -> Registration {
        var presented = [PresentedIdentifier(rawKind: 2, text: pool[Int(generator.next() % UInt64(pool.count))].text)]
        if generator.next() % 2 == 0 {
            presented.append(PresentedIdentifier(rawKind: 1, text: pool[Int(generator.next() % UInt64(pool.count))].text))
        }
        return try Registration(bundle: ["com.v.a", "com.v.b", "org.w.c"][Int(generator.next() % 3)], identifiers: presented, rules: rules)
    }

    /// A device ID minted at `now` from the same seeded sequence.
    public mutating func mint(at now: HLCTimestamp) -> DeviceID {
        DeviceID.mint(at: now, using: &generator)
    }

    /// A draw from the same sequence, for a caller's own seeded choices.
    public mutating func draw() -> UInt64 {
        generator.next()
    }
}
