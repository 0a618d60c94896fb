/// Validates bundle IDs and finds their vendor, remembering the answers: a connection sends
/// the same few bundles over and over, and parsing plus the vendor-rule search was a fifth of
/// a registration's cost. A plain value; give each connection (or thread) its own.
public struct BundleResolver: Sendable {
    public let rules: VendorRules
    /// Which rules these are, as their holder numbers them (a node's rules change when the
    /// cluster's do), so that a holder can tell a resolver built from older rules.
    public let version: Int
    /// Distinct bundles remembered before the memo starts again from empty.
    public let capacity: Int
    /// The texts seen, numbered, and what each resolved to (by number). An ``Interner``, so a
    /// lookup costs one cheap hash of the text rather than `Hasher`'s.
    private var texts = Interner<String>()
    private var resolved: [(bundle: BundleID, vendor: Vendor)] = []

    public init(rules: VendorRules, version: Int = 0, capacity: Int = 4096) {
        self.rules = rules
        self.version = version
        self.capacity = capacity
    }

    /// The validated bundle and its vendor; throws ``IdentityError/invalidBundleID(_:)`` as
    /// ``BundleID/init(parsing:)`` does. Refusals are not remembered.
    public mutating func resolve(_ text: String) throws(IdentityError) -> (bundle: BundleID, vendor: Vendor) {
        if let known = texts.number(of: text) { return resolved[Int(known)] }
        let bundle = try BundleID(parsing: text)
        let answer = (bundle: bundle, vendor: rules.vendor(of: bundle))
        guard capacity > 0 else { return answer }
        if resolved.count >= capacity {
            texts = Interner()
            resolved.removeAll(keepingCapacity: true)
        }
        _ = texts.intern(text)
        resolved.append(answer)
        return answer
    }
}

extension String: Internable {
    var internHash: UInt64 { TextHash.of(self) }
}
