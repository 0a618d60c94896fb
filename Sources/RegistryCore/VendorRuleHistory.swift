/// Every change of the cluster's vendor rules a replica holds, and the rules they make.
///
/// The rule (`docs/identity.md`, "Vendors kept by the cluster"):
///
/// 1. The seed is the seed changes of the earliest seeding start, by (HLC, origin) of that start;
///    the seeds of later starts (a node that joined later with its own config file) are ignored,
///    and so is a seed later than some operator change (a cluster whose rules were set by hand).
/// 2. A vendor's rule is its latest operator change (``VendorRuleChange/Kind/set`` or
///    ``VendorRuleChange/Kind/remove``) by (HLC, origin), else its seed's rule, else none.
/// 3. Two rules that claim one prefix (only changes accepted on nodes that could not hear each
///    other get there): the rule whose deciding change is earlier keeps it. A rule left without a
///    valid set of prefixes is dropped.
///
/// The rules depend on the set of changes alone, so replicas that hold the same changes apply the
/// same rules, whatever order the changes arrived in.
public struct VendorRuleHistory: Sendable {
    /// Every change held.
    public private(set) var changes: Set<VendorRuleChange> = []
    /// The rules in force, sorted by name.
    public private(set) var rules: [VendorRule] = []
    /// The vendors that moves joined, and the names they are filed under.
    public private(set) var aliases = VendorAliases()

    public init() {}

    /// Adds `change`; false when it was already held.
    @discardableResult
    public mutating func insert(_ change: VendorRuleChange) -> Bool {
        guard changes.insert(change).inserted else { return false }
        rules = Self.rules(of: changes)
        if change.move != nil { aliases = VendorAliases(changes) }
        return true
    }

    static func rules(of changes: Set<VendorRuleChange>) -> [VendorRule] {
        let seeds = changes.filter { $0.kind == .seed }
        let firstSeed = seeds.min { $0.isEarlier(than: $1) }
        let firstOperatorChange = changes.filter { $0.kind != .seed }.min { $0.isEarlier(than: $1) }
        var deciding = [String: VendorRuleChange]()
        if let firstSeed, firstOperatorChange.map({ firstSeed.isEarlier(than: $0) }) ?? true {
            for change in seeds where (change.time, change.origin) == (firstSeed.time, firstSeed.origin) {
                // One start seeds a vendor once; were there two, the earlier would count.
                if let held = deciding[change.name], held.isEarlier(than: change) { continue }
                deciding[change.name] = change
            }
        }
        var explicit = [String: VendorRuleChange]()
        for change in changes where change.kind != .seed {
            if let held = explicit[change.name], !held.isEarlier(than: change) { continue }
            explicit[change.name] = change
        }
        deciding.merge(explicit) { _, byOperator in byOperator }
        var taken = Set<String>()
        var rules = [VendorRule]()
        for change in deciding.values.sorted(by: { $0.isEarlier(than: $1) }) {
            guard let rule = change.rule else { continue }
            let free = rule.prefixes.filter { !taken.contains($0) }
            guard let kept = try? VendorRule(name: rule.name, prefixes: free, binding: rule.binding, clones: rule.clones) else { continue }
            taken.formUnion(kept.prefixes)
            rules.append(kept)
        }
        return rules.sorted { $0.name < $1.name }
    }
}
