/// Which vendor names moves joined, and the name their devices are filed under: what a replica
/// makes of every ``VendorMove`` it holds.
///
/// The rule (`docs/identity.md`, "Moving devices between vendors"):
///
/// 1. A move joins its vendors for good: the vendors that moves connect, directly or through
///    others, are one vendor (a union, so the order in which moves arrive does not matter).
/// 2. The one vendor is filed under the name the latest of those moves, by (HLC, origin), went
///    into; every other name of it is an alias of that name.
///
/// Like ``VendorRuleHistory``, it depends on the set of changes alone.
public struct VendorAliases: Equatable, Sendable {
    /// Each name a move joined to a vendor filed under another name, to that name.
    public let canonical: [String: String]

    public init() {
        canonical = [:]
    }

    /// What the moves of `changes` make.
    init(_ changes: some Sequence<VendorRuleChange>) {
        var parent = [String: String]()
        func root(_ name: String) -> String {
            var current = name
            while let next = parent[current], next != current { current = next }
            return current
        }
        let moving = changes.filter { $0.move != nil }
        for change in moving {
            let move = change.move!
            for name in move.from + [move.into] where parent[name] == nil { parent[name] = name }
            for name in move.from {
                let (a, b) = (root(name), root(move.into))
                if a != b { parent[a] = b }
            }
        }
        // Each set's name: where its latest move went.
        var latest = [String: VendorRuleChange]()
        for change in moving {
            let set = root(change.move!.into)
            if let held = latest[set], !held.isEarlier(than: change) { continue }
            latest[set] = change
        }
        var canonical = [String: String]()
        for name in parent.keys {
            let filedUnder = latest[root(name)]!.move!.into
            if name != filedUnder { canonical[name] = filedUnder }
        }
        self.canonical = canonical
    }

    /// True when no move joined any vendor.
    public var isEmpty: Bool { canonical.isEmpty }

    /// The name `name`'s devices are filed under: itself unless a move joined it to another.
    public func name(of name: String) -> String { canonical[name] ?? name }

    /// `vendor`, or the vendor a move joined it to.
    public func filing(_ vendor: Vendor) -> Vendor {
        guard !canonical.isEmpty, let name = canonical[vendor.name] else { return vendor }
        return Vendor(trusted: name)
    }

    /// The names joined to `name`'s vendor that it is filed under instead of them, sorted.
    public func aliases(of name: String) -> [String] {
        canonical.filter { $0.value == name }.map(\.key).sorted()
    }
}
