/// A change of the cluster's vendor rules, as it is logged and replicated.
///
/// The rules a node applies are what ``VendorRuleHistory`` makes of every change it holds, so
/// that every node holding the same changes applies the same rules (`docs/identity.md`,
/// "Vendors kept by the cluster").
public struct VendorRuleChange: Hashable, Sendable {
    public enum Kind: UInt8, Hashable, Sendable {
        /// A rule from a node's config file, logged at its first start: the earliest start's
        /// seed is the cluster's, every seed of a later start is ignored. A start whose file has
        /// no rule logs one seed with an empty name and no rule, so that it counts as a start.
        case seed = 1
        /// A rule added or changed by an operator.
        case set = 2
        /// A rule removed by an operator: its bundles fall back to the default vendor.
        case remove = 3
    }

    public let kind: Kind
    /// The vendor's name.
    public let name: String
    /// The rule (nil for ``Kind/remove``, and for the seed of a file without rules).
    public let rule: VendorRule?
    /// When the change was accepted. The changes of one seed share it.
    public let time: HLCTimestamp
    /// The node that accepted it.
    public let origin: NodeID

    public init(kind: Kind, name: String, rule: VendorRule?, time: HLCTimestamp, origin: NodeID) {
        precondition(
            (kind == .remove || (kind == .seed && name.isEmpty)) == (rule == nil) && (rule.map { $0.name == name } ?? true),
            "a rule change names its own rule")
        self.kind = kind
        self.name = name
        self.rule = rule
        self.time = time
        self.origin = origin
    }

    /// The seed of a start whose config file has no vendor rule.
    public static func emptySeed(time: HLCTimestamp, origin: NodeID) -> VendorRuleChange {
        VendorRuleChange(kind: .seed, name: "", rule: nil, time: time, origin: origin)
    }

    /// True when `self` was accepted before `other`: by HLC, then origin.
    func isEarlier(than other: VendorRuleChange) -> Bool {
        (time, origin) < (other.time, other.origin)
    }
}

extension VendorRule: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(prefixes)
        hasher.combine(binding)
    }
}
