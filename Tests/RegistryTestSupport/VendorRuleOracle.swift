import RegistryCore

/// The rule of the cluster's vendor rules (docs/identity.md, "Vendors kept by the cluster")
/// written out once more, apart from ``VendorRuleHistory``: step by step on plain dictionaries
/// and tuples of (HLC, origin text).
public enum VendorRuleOracle {
    public static func rules(_ changes: [VendorRuleChange]) -> [VendorRule] {
        func key(_ change: VendorRuleChange) -> (UInt64, String) { (change.time.rawValue, change.origin.value) }
        func before(_ a: (UInt64, String), _ b: (UInt64, String)) -> Bool { a.0 != b.0 ? a.0 < b.0 : a.1 < b.1 }
        let seeds = changes.filter { $0.kind == .seed }
        var firstStart: (UInt64, String)?
        for seed in seeds where firstStart == nil || before(key(seed), firstStart!) { firstStart = key(seed) }
        var decided = [String: VendorRuleChange]()
        for seed in seeds where key(seed) == firstStart! { decided[seed.name] = seed }
        var latest = [String: VendorRuleChange]()
        for change in changes where change.kind != .seed {
            if let held = latest[change.name], !before(key(held), key(change)) { continue }
            latest[change.name] = change
        }
        for (name, change) in latest { decided[name] = change }
        let order = decided.values.sorted { a, b in key(a) == key(b) ? a.name < b.name : before(key(a), key(b)) }
        var owner = [String: String]()
        var result = [VendorRule]()
        for change in order {
            guard let rule = change.rule else { continue }
            let free = rule.prefixes.filter { owner[$0] == nil }
            if free.isEmpty || (rule.name.contains(".") && !free.contains(rule.name)) { continue }
            for prefix in free { owner[prefix] = rule.name }
            result.append(try! VendorRule(name: rule.name, prefixes: free, binding: rule.binding))
        }
        return result.sorted { $0.name < $1.name }
    }
}
