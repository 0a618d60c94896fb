/// A change of the cluster's vendor rules, as it is logged and replicated.
///
/// The rules a node applies are what ``VendorRuleHistory`` makes of every change it holds, so
/// that every node holding the same changes applies the same rules (`docs/identity.md`,
/// "Vendors kept by the cluster").
public struct VendorRuleChange: Hashable, Sendable {
    public enum Kind: UInt8, Hashable, Sendable {
        /// A rule from a node's config file, logged at its first start: the earliest start's
        /// seed is the cluster's, every seed of a later start is ignored.
        case seed = 1
        /// A rule added or changed by an operator.
        case set = 2
        /// A rule removed by an operator: its bundles fall back to the default vendor.
        case remove = 3
    }

    public let kind: Kind
    /// The vendor's name.
    public let name: String
    /// The rule (nil for ``Kind/remove``).
    public let rule: VendorRule?
    /// When the change was accepted. The changes of one seed share it.
    public let time: HLCTimestamp
    /// The node that accepted it.
    public let origin: NodeID
    /// The vendors whose devices the change moves, when the operator asked for the move
    /// (``VendorAliases`` says what it does); nil for a change that moves none.
    public let move: VendorMove?

    public init(kind: Kind, name: String, rule: VendorRule?, time: HLCTimestamp, origin: NodeID, move: VendorMove? = nil) {
        precondition((kind == .remove) == (rule == nil) && (rule.map { $0.name == name } ?? true), "a rule change names its own rule")
        precondition(kind != .seed || move == nil, "a seed moves no device")
        self.kind = kind
        self.name = name
        self.rule = rule
        self.time = time
        self.origin = origin
        self.move = move
    }

    /// A change read back from its stored or sent fields (`maxDevices` and `activeWithinDays` as
    /// their wire numbers, 0 for none; `moved` empty for no move), the rule checked as
    /// ``VendorRule`` checks it and the move as ``VendorMove`` does: a corrupt or hostile change
    /// is refused, not applied.
    public static func reading(
        kind: Kind, name: String, prefixes: [String], maxDevices: Int, activeWithinDays: Int, pastLimit: BindingPolicy.PastLimit,
        time: HLCTimestamp, origin: NodeID, moved: [String] = [], movedInto: String = "", cloneAction: UInt8 = 0,
        cloneWindowDays: Int = 0
    ) throws(IdentityError) -> VendorRuleChange {
        let move = try VendorMove.reading(moved: moved, into: movedInto)
        guard kind != .seed || move == nil else { throw .invalidVendor("a seed of vendor \(quoted(name)) moves devices") }
        guard kind != .remove else {
            guard !name.isEmpty else { throw .invalidVendor("a removal names no vendor") }
            return VendorRuleChange(kind: kind, name: name, rule: nil, time: time, origin: origin, move: move)
        }
        let policy = try BindingPolicy(
            maxDevices: maxDevices, activeWithinDays: activeWithinDays == 0 ? nil : activeWithinDays, pastLimit: pastLimit)
        let clones = try ClonePolicy.reading(action: cloneAction, windowDays: cloneWindowDays)
        let rule = try VendorRule(name: name, prefixes: prefixes, binding: policy, clones: clones)
        guard rule.name == name else { throw .invalidVendor("vendor name \(quoted(name)) is not in its normal form") }
        return VendorRuleChange(kind: kind, name: name, rule: rule, time: time, origin: origin, move: move)
    }

    /// True when `self` was accepted before `other`: by HLC, then origin. Changes one node makes
    /// never share both, but the order is total all the same (then kind, name, and the rule's
    /// fields), so that no replica's order can depend on the order changes arrived in.
    func isEarlier(than other: VendorRuleChange) -> Bool {
        if (time, origin) != (other.time, other.origin) { return (time, origin) < (other.time, other.origin) }
        return tieKey.lexicographicallyPrecedes(other.tieKey)
    }

    private var tieKey: [String] {
        let policy = rule.map { "\($0.binding.maxDevices)/\($0.binding.activeWithinDays ?? 0)/\($0.binding.pastLimit.rawValue)" } ?? ""
        let move = self.move.map { "\($0.from.joined(separator: ","))>\($0.into)" } ?? ""
        let clones = rule.map { "\($0.clones.action.rawValue)/\($0.clones.windowDays)" } ?? ""
        return ["\(kind.rawValue)", name, (rule?.prefixes ?? []).joined(separator: ","), policy, move, clones]
    }
}

extension VendorRule: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(prefixes)
        hasher.combine(binding)
        hasher.combine(clones)
    }
}
