/// How a bundle ID that no vendor rule matches finds its vendor.
///
/// The scope a node uses is pinned in its data directory (`docs/identity.md`, "The default
/// vendor"): a newer list, or another depth, would put the bundles already seen under other
/// vendors, and so give their devices new IDs without a word.
public enum DefaultVendorScope: Equatable, Sendable, CustomStringConvertible {
    /// The first this-many labels (at least 2): `com.acme.mail` is `com.acme` at 2.
    case labels(Int)
    /// The public suffix and one label more: `uk.co.bbc.iplayer` is `uk.co.bbc`.
    case publicSuffix(PublicSuffixList)

    /// The number of leading labels of `labels` that name the vendor.
    func vendorLabelCount<Label: StringProtocol>(_ labels: [Label]) -> Int {
        switch self {
        case .labels(let depth): min(depth, labels.count)
        case .publicSuffix(let list): list.vendorLabelCount(labels)
        }
    }

    /// Whether `labels` name a vendor of this scope: the vendor of a bundle one label below them.
    /// The label probed with is `-`, which no rule of the list holds (no domain label is a lone
    /// hyphen), so only a wildcard can match it, as it would any app's label.
    func namesVendor(_ labels: [Substring]) -> Bool {
        vendorLabelCount(labels + ["-"]) == labels.count
    }

    /// The fewest labels a default vendor name has: a bundle ID shorter than this has its own
    /// labels as its vendor.
    var minimumLabels: Int {
        switch self {
        case .labels(let depth): depth
        case .publicSuffix: 2
        }
    }

    /// The line this scope adds to ``VendorRules/fingerprint``. The depth's is the line that
    /// fingerprint held before the list existed, so that nodes which pinned a depth keep
    /// agreeing with each other across the upgrade.
    var fingerprintLine: String {
        switch self {
        case .labels(let depth): "depth=\(depth)\n"
        case .publicSuffix(let list): "public-suffix-list=\(String(list.fingerprint, radix: 16))\n"
        }
    }

    public var description: String {
        switch self {
        case .labels(let depth): "the first \(depth) labels"
        case .publicSuffix(let list):
            "the public suffix list (\(list.ruleCount) rules, fingerprint \(String(list.fingerprint, radix: 16)))"
        }
    }
}
