/// The move an operator asked for with a change of the vendor rules: the devices of every vendor
/// in `from` join vendor `into` (``VendorAliases`` says how replicas carry it out).
public struct VendorMove: Hashable, Sendable {
    /// The vendors whose devices move, sorted, without `into`.
    public let from: [String]
    /// The vendor they join.
    public let into: String

    /// A move of `from` into `into`; nil when `from` names no vendor but `into`.
    public init?(from: some Sequence<String>, into: String) {
        let names = Set(from).subtracting([into]).sorted()
        guard !names.isEmpty else { return nil }
        self.from = names
        self.into = into
    }

    /// A move read back from its stored or sent fields: nil when `moved` is empty (no move);
    /// a corrupt or hostile one is refused, not applied.
    static func reading(moved: [String], into: String) throws(IdentityError) -> VendorMove? {
        guard !moved.isEmpty || !into.isEmpty else { return nil }
        for name in moved + [into] {
            let grammar = name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            }
            guard !name.isEmpty, name.utf8.count <= BundleID.maxLength, grammar else {
                throw .invalidVendor("a move names vendor \(quoted(name)), which is no vendor name")
            }
        }
        guard let move = VendorMove(from: moved, into: into), move.from.count == moved.count else {
            throw .invalidVendor("a move into \(quoted(into)) names a vendor twice, or names no vendor to move")
        }
        return move
    }
}

extension VendorMove {
    /// The move that carries out a change of the vendor rules, from what it would do to the
    /// devices held (``RegistryState/destinations(from:to:changing:)``): nil when it moves none. A move
    /// joins whole vendors into one: refused when some vendor's devices would go to more than
    /// one vendor (or partly stay), or when devices would go into more than one vendor.
    public static func planned(destinations: [Vendor: Set<Vendor>]) throws(IdentityError) -> VendorMove? {
        guard !destinations.isEmpty else { return nil }
        for (vendor, targets) in destinations.sorted(by: { $0.key < $1.key }) where targets.count > 1 {
            let stay = targets.contains(vendor) ? ", and some would stay" : ""
            let others = targets.subtracting([vendor]).map(\.name).sorted().joined(separator: ", ")
            throw .invalidVendor(
                "vendor \(vendor.name)'s devices would go to \(others)\(stay); a move takes a vendor's devices whole, into one vendor")
        }
        let into = Set(destinations.values.compactMap(\.first))
        guard into.count == 1, let target = into.first else {
            throw .invalidVendor(
                "the change would move devices into \(into.map(\.name).sorted().joined(separator: ", ")); a move goes into one vendor")
        }
        return VendorMove(from: destinations.keys.map(\.name), into: target.name)
    }
}
