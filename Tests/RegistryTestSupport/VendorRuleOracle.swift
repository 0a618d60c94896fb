import RegistryCore

/// The rule of the cluster's vendor rules (docs/identity.md, "Vendors kept by the cluster")
/// written out once more, apart from ``VendorRuleHistory``: step by step on plain dictionaries
/// and tuples of (HLC, origin text).
public enum VendorRuleOracle {
    public static func rules(_ changes: [VendorRuleChange]) -> [VendorRule] {
        // Accepted when, where, then (for changes that share both, which one node never makes)
        // kind, name and rule, as text.
        func key(_ change: VendorRuleChange) -> (UInt64, String) { (change.time.rawValue, change.origin.value) }
        func full(_ change: VendorRuleChange) -> (String, String, String, String) {
            let policy = change.rule.map { "\($0.binding.maxDevices)/\($0.binding.activeWithinDays ?? 0)/\($0.binding.pastLimit.rawValue)" } ?? ""
            return ("\(change.kind.rawValue)", change.name, change.rule?.prefixes.joined(separator: ",") ?? "", policy)
        }
        func before(_ a: (UInt64, String), _ b: (UInt64, String)) -> Bool { a.0 != b.0 ? a.0 < b.0 : a.1 < b.1 }
        func earlier(_ a: VendorRuleChange, _ b: VendorRuleChange) -> Bool { key(a) == key(b) ? full(a) < full(b) : before(key(a), key(b)) }
        let seeds = changes.filter { $0.kind == .seed }
        var firstSeed: VendorRuleChange?
        for seed in seeds where firstSeed == nil || earlier(seed, firstSeed!) { firstSeed = seed }
        var firstOperator: VendorRuleChange?
        for change in changes where change.kind != .seed && (firstOperator == nil || earlier(change, firstOperator!)) {
            firstOperator = change
        }
        var decided = [String: VendorRuleChange]()
        // The seed counts only when it came before every operator change.
        if let firstSeed, firstOperator.map({ earlier(firstSeed, $0) }) ?? true {
            for seed in seeds where key(seed) == key(firstSeed) {
                if let held = decided[seed.name], earlier(held, seed) { continue }
                decided[seed.name] = seed
            }
        }
        var latest = [String: VendorRuleChange]()
        for change in changes where change.kind != .seed {
            if let held = latest[change.name], !earlier(held, change) { continue }
            latest[change.name] = change
        }
        for (name, change) in latest { decided[name] = change }
        let order = decided.values.sorted(by: earlier)
        var owner = [String: String]()
        var result = [VendorRule]()
        for change in order {
            guard let rule = change.rule else { continue }
            let free = rule.prefixes.filter { owner[$0] == nil }
            if free.isEmpty || (rule.name.contains(".") && !free.contains(rule.name)) { continue }
            for prefix in free { owner[prefix] = rule.name }
            result.append(try! VendorRule(name: rule.name, prefixes: free, binding: rule.binding, clones: rule.clones))
        }
        return result.sorted { $0.name < $1.name }
    }

    /// The rule of vendor moves (docs/identity.md, "Moving devices between vendors") written out
    /// apart from ``VendorAliases``: the vendors that moves connect are found by a search over the
    /// graph of (moved, into) edges, and each group goes by the `into` of its move accepted last
    /// by (HLC, origin text). Every name of a group but that one maps to it.
    public static func aliases(_ changes: [VendorRuleChange]) -> [String: String] {
        let moves = changes.filter { $0.move != nil }
        var neighbours = [String: Set<String>]()
        for change in moves {
            let move = change.move!
            for name in move.from {
                neighbours[name, default: []].insert(move.into)
                neighbours[move.into, default: []].insert(name)
            }
        }
        var result = [String: String]()
        var visited = Set<String>()
        for start in neighbours.keys.sorted() where !visited.contains(start) {
            var group = Set<String>()
            var frontier = [start]
            while let name = frontier.popLast() {
                guard group.insert(name).inserted else { continue }
                frontier.append(contentsOf: neighbours[name] ?? [])
            }
            visited.formUnion(group)
            let last = moves.filter { group.contains($0.move!.into) }.max { a, b in
                a.time.rawValue != b.time.rawValue ? a.time.rawValue < b.time.rawValue : a.origin.value < b.origin.value
            }!
            for name in group where name != last.move!.into { result[name] = last.move!.into }
        }
        return result
    }
}
