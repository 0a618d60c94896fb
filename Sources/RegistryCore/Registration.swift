/// A register request that passed the identity rules: a bundle, its vendor, and at least one
/// valid identifier (at most one per kind). Identifiers that were malformed, all-zero or of an
/// unknown kind are kept in `rejected` so the caller can be told.
public struct Registration: Hashable, Sendable {
    public let bundle: BundleID
    public let vendor: Vendor
    /// Sorted by kind.
    public let identifiers: [Identifier]
    public let rejected: [PresentedIdentifier]

    public init(bundle: String, identifiers presented: [PresentedIdentifier], rules: VendorRules) throws(IdentityError) {
        let bundle = try BundleID(parsing: bundle)
        guard !presented.isEmpty else { throw .missingIdentifier }
        var kinds = Set<Int32>()
        var valid = [Identifier]()
        var rejected = [PresentedIdentifier]()
        var firstRejection: IdentityError?
        for item in presented {
            guard kinds.insert(item.rawKind).inserted else {
                let name = IdentifierKind(rawValue: item.rawKind).map { "\($0)" } ?? "kind \(item.rawKind)"
                throw .invalidIdentifier("\(name) appears more than once")
            }
            do {
                valid.append(try Identifier(rawKind: item.rawKind, text: item.text))
            } catch {
                rejected.append(item)
                firstRejection = firstRejection ?? error
            }
        }
        if valid.isEmpty, let firstRejection { throw firstRejection }
        self.bundle = bundle
        self.vendor = rules.vendor(of: bundle)
        self.identifiers = valid.sorted { $0.kind < $1.kind }
        self.rejected = rejected
    }
}
