/// A register request that passed the identity rules: a bundle, its vendor, and at least one
/// valid identifier (at most one per kind). Identifiers that were malformed, all-zero or of an
/// unknown kind are kept in `rejected` so the caller can be told.
public struct Registration: Hashable, Sendable {
    public let bundle: BundleID
    public let vendor: Vendor
    /// Sorted by kind, at most one of each.
    public let identifiers: IdentifierList
    public let rejected: [PresentedIdentifier]

    public init(bundle: String, identifiers presented: [PresentedIdentifier], rules: VendorRules) throws(IdentityError) {
        var resolver = BundleResolver(rules: rules, capacity: 0)
        try self.init(bundle: bundle, identifiers: presented, resolver: &resolver)
    }

    /// Validates with a ``BundleResolver``, which remembers bundles already seen. Each valid
    /// identifier is kept as `transform` gives it back, which must keep its kind (the node's keyed
    /// hashing of identifiers at rest): applied as the identifiers are made, so that keying them
    /// takes no second array.
    public init(
        bundle: String, identifiers presented: [PresentedIdentifier], resolver: inout BundleResolver,
        transform: (Identifier) -> Identifier = { $0 }
    ) throws(IdentityError) {
        let (bundle, vendor) = try resolver.resolve(bundle)
        guard !presented.isEmpty else { throw .missingIdentifier }
        try Self.refuseRepeatedKinds(presented)
        // Other malformed identifiers are ignored and echoed back in the answer; one holding a
        // NUL could not be echoed (a protobuf-c string ends at its first NUL), so it refuses the
        // request.
        if let withNUL = presented.first(where: \.value.containsNUL) {
            let kind = IdentifierKind(rawValue: withNUL.rawKind).map { "\($0)" } ?? "identifier of kind \(withNUL.rawKind)"
            throw .invalidIdentifier("\(kind) \(quoted(withNUL.text)) holds a NUL byte")
        }
        // At most one of each known kind (``refuseRepeatedKinds(_:)``): they fit the list.
        var valid = IdentifierList()
        var rejected = [PresentedIdentifier]()
        var firstRejection: IdentityError?
        for item in presented {
            do {
                valid.append(transform(try Identifier(item)))
            } catch {
                rejected.append(item)
                firstRejection = firstRejection ?? error
            }
        }
        if valid.isEmpty, let firstRejection { throw firstRejection }
        if !valid.isSorted(by: { $0.kind < $1.kind }) { valid.sort { $0.kind < $1.kind } }
        self.bundle = bundle
        self.vendor = vendor
        self.identifiers = valid
        self.rejected = rejected
    }

    /// At most one identifier per kind. A handful are compared pairwise (no allocation);
    /// many, which only a broken or hostile client sends, go through a set.
    private static func refuseRepeatedKinds(_ presented: [PresentedIdentifier]) throws(IdentityError) {
        var repeated: Int32?
        if presented.count <= 8 {
            outer: for i in presented.indices {
                for j in presented.indices where j > i && presented[j].rawKind == presented[i].rawKind {
                    repeated = presented[i].rawKind
                    break outer
                }
            }
        } else {
            var kinds = Set<Int32>()
            repeated = presented.first { !kinds.insert($0.rawKind).inserted }?.rawKind
        }
        if let repeated {
            let name = IdentifierKind(rawValue: repeated).map { "\($0)" } ?? "kind \(repeated)"
            throw .invalidIdentifier("\(name) appears more than once")
        }
    }
}

extension RandomAccessCollection where Index == Int {
    func isSorted(by areInIncreasingOrder: (Element, Element) -> Bool) -> Bool {
        indices.dropFirst().allSatisfy { !areInIncreasingOrder(self[$0], self[$0 - 1]) }
    }
}
