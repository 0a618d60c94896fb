/// One configured vendor: a name, the bundle-ID prefixes it owns, its binding policy and its
/// clone policy.
public struct VendorRule: Equatable, Sendable {
    /// The vendor scope this rule produces.
    public let name: String
    /// Lower-case label prefixes, such as `uk.co.bbc`.
    public let prefixes: [String]
    /// How many devices one account may be bound to, and what a bind past that does.
    public let binding: BindingPolicy
    /// What a keychain UUID seen with two active IDFVs does (``ClonePolicy``).
    public let clones: ClonePolicy

    /// Validates a rule. `name` defaults to the first prefix. A name must be either free of
    /// dots (so it can never equal a default `label.label` scope) or one of the rule's own
    /// prefixes; otherwise devices of two vendors could meet in one scope.
    public init(
        name: String?, prefixes: [String], binding: BindingPolicy = .default, clones: ClonePolicy = .default
    ) throws(IdentityError) {
        guard !prefixes.isEmpty else { throw .invalidVendor("a vendor rule needs at least one prefix") }
        var normalised = [String]()
        for prefix in prefixes {
            // Normalised, not made into a bundle ID: only its text is kept, and a rule checked
            // (a preview, a refused change) must not add names to the process's InternedTexts.
            do {
                normalised.append(try BundleID.normalized(prefix, what: "vendor prefix"))
            } catch {
                throw .invalidVendor("prefix \(quoted(prefix)): \(error)")
            }
        }
        let chosen = (name ?? normalised[0]).lowercased()
        guard !chosen.isEmpty, chosen.utf8.count <= BundleID.maxLength else {
            throw .invalidVendor("vendor name \(quoted(chosen)) must be 1 to \(BundleID.maxLength) bytes")
        }
        if chosen.contains(".") {
            guard normalised.contains(chosen) else {
                throw .invalidVendor(
                    "vendor name \(quoted(chosen)) contains '.' but is not one of its own prefixes \(normalised)")
            }
        } else {
            let allowed = chosen.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
            }
            guard allowed else {
                throw .invalidVendor("vendor name \(quoted(chosen)) may hold only letters, digits and '-'")
            }
        }
        self.name = chosen
        self.prefixes = normalised
        self.binding = binding
        self.clones = clones
    }
}

/// Maps a bundle ID to its vendor scope: the longest rule prefix wins, otherwise the default
/// scope (``DefaultVendorScope``).
public struct VendorRules: Equatable, Sendable {
    /// Prefix to vendor name, searched longest first.
    private let byPrefix: [(prefix: String, vendor: String)]
    /// Where a bundle that no rule matches belongs.
    public let defaultScope: DefaultVendorScope
    public let rules: [VendorRule]
    /// Vendor names that moves joined to others (``VendorAliases``): a bundle whose rule or
    /// default names one of them belongs to the vendor it was joined to.
    public let aliases: VendorAliases

    /// Validates that no prefix belongs to two rules and no two rules share a name.
    public init(rules: [VendorRule] = [], defaultScope: DefaultVendorScope, aliases: VendorAliases = VendorAliases()) throws(IdentityError) {
        if case .labels(let depth) = defaultScope, depth < 2 {
            throw .invalidVendor("the default vendor depth must be at least 2 labels")
        }
        var seen = [String: String]()
        var names = Set<String>()
        for rule in rules {
            guard names.insert(rule.name).inserted else {
                throw .invalidVendor("two vendor rules are named \(quoted(rule.name))")
            }
            for prefix in rule.prefixes {
                if let other = seen[prefix] {
                    throw .invalidVendor("prefix \(quoted(prefix)) belongs to both \(quoted(other)) and \(quoted(rule.name))")
                }
                seen[prefix] = rule.name
            }
        }
        self.rules = rules
        self.defaultScope = defaultScope
        self.aliases = aliases
        byPrefix = seen.map { ($0.key, $0.value) }.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// Rules whose default scope is the first `defaultDepth` labels.
    public init(rules: [VendorRule] = [], defaultDepth: Int = 2) throws(IdentityError) {
        try self.init(rules: rules, defaultScope: .labels(defaultDepth))
    }

    /// The same rules with another default scope.
    public func with(defaultScope: DefaultVendorScope) throws(IdentityError) -> VendorRules {
        try VendorRules(rules: rules, defaultScope: defaultScope, aliases: aliases)
    }

    /// Names these rules, the same on every node that holds the same rules whatever their order
    /// in the file: a fixed-key hash of the default scope, every (prefix, vendor), sorted by
    /// prefix, and every binding policy other than the default. Never 0 (0 on the wire means
    /// "not said").
    public var fingerprint: UInt64 {
        var text = defaultScope.fingerprintLine
        for (prefix, vendor) in byPrefix.sorted(by: { $0.prefix < $1.prefix }) { text += "\(prefix)=\(vendor)\n" }
        // A policy other than the default is part of the rules too (the default adds nothing, so
        // that rules written before policies existed keep their fingerprint).
        for rule in rules.sorted(by: { $0.name < $1.name }) where rule.binding != .default {
            let window = rule.binding.activeWithinDays.map(String.init) ?? "-"
            text += "binding \(rule.name)=\(rule.binding.maxDevices),\(window),\(rule.binding.pastLimit.rawValue)\n"
        }
        for rule in rules.sorted(by: { $0.name < $1.name }) where rule.clones != .default {
            text += "clones \(rule.name)=\(rule.clones.action.rawValue),\(rule.clones.windowDays)\n"
        }
        return max(StateDigest.text(text), 1)
    }

    /// ``fingerprint`` of no rule and this default scope: what peers compare, now that the rules
    /// themselves are the cluster's (``VendorRuleHistory``).
    public var defaultScopeFingerprint: UInt64 {
        // The scope was checked when these rules were made.
        (try? VendorRules(defaultScope: defaultScope))?.fingerprint ?? 1
    }

    /// The vendor scope of `bundle`: its rule's, else the default scope's, unless a move joined
    /// that vendor to another.
    public func vendor(of bundle: BundleID) -> Vendor {
        aliases.filing(namedVendor(of: bundle))
    }

    /// The vendor the rules or the default scope name for `bundle`, before moves: where a change
    /// of the rules sends the bundle's devices (``RegistryState/devicesMoved(from:to:changing:)``).
    public func namedVendor(of bundle: BundleID) -> Vendor {
        Vendor(trusted: vendorName(ofNormalized: bundle.value))
    }

    /// ``namedVendor(of:)``'s name, of a bundle ID's normalised text.
    private func vendorName(ofNormalized bundle: String) -> String {
        for entry in byPrefix where BundleID.hasLabelPrefix(bundle, entry.prefix) {
            return entry.vendor
        }
        let labels = BundleID.labels(of: bundle)
        return labels.prefix(defaultScope.vendorLabelCount(labels)).joined(separator: ".")
    }

    /// The name of ``vendor(of:)``'s vendor for the bundle ID `text`, without making the bundle
    /// ID or the vendor (a read must not add names to the process's ``InternedText``s); throws as
    /// ``BundleID/init(parsing:)`` does.
    public func vendorName(ofBundle text: String) throws(IdentityError) -> String {
        aliases.name(of: vendorName(ofNormalized: try BundleID.normalized(text)))
    }

    /// The binding policy of `vendor`: its rule's, or ``BindingPolicy/default`` for a vendor
    /// without a rule.
    public func bindingPolicy(of vendor: Vendor) -> BindingPolicy {
        rules.first { $0.name == vendor.name }?.binding ?? .default
    }

    /// The clone policy of `vendor`: its rule's, or ``ClonePolicy/default`` for a vendor without
    /// a rule.
    public func clonePolicy(of vendor: Vendor) -> ClonePolicy {
        rules.first { $0.name == vendor.name }?.clones ?? .default
    }

    /// Checks that `name` is a scope these rules can produce (a rule name, or a name the default
    /// scope gives) so a lookup by vendor gets a clear error for a typo.
    public func vendor(named name: String) throws(IdentityError) -> Vendor {
        Vendor(trusted: try vendorName(named: name))
    }

    /// ``vendor(named:)``'s name, without making the vendor (a read must not add names to the
    /// process's ``InternedText``s).
    public func vendorName(named name: String) throws(IdentityError) -> String {
        let lowered = name.lowercased()
        // A name moves joined vendors under is one too, whether or not a rule still names it.
        if rules.contains(where: { $0.name == lowered }) || aliases.canonical[lowered] != nil || aliases.canonical.values.contains(lowered) {
            return aliases.name(of: lowered)
        }
        let refusal = IdentityError.invalidVendor(
            "\(quoted(name)) is neither a vendor rule's name nor a vendor that \(defaultScope) names")
        guard let normalized = try? BundleID.normalized(lowered, minimumLabels: defaultScope.minimumLabels, what: "vendor"),
            defaultScope.namesVendor(BundleID.labels(of: normalized))
        else { throw refusal }
        return aliases.name(of: vendorName(ofNormalized: normalized))
    }

    public static func == (lhs: VendorRules, rhs: VendorRules) -> Bool {
        lhs.rules == rhs.rules && lhs.defaultScope == rhs.defaultScope && lhs.aliases == rhs.aliases
    }
}

/// A vendor scope. All data is partitioned by it; nothing links devices across vendors.
public struct Vendor: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The name, interned for the process: a copy counts no references (``InternedText``).
    public let text: InternedText

    public var name: String { text.string }

    /// Only ``VendorRules`` and replayed operations create vendors.
    public init(trusted name: String) {
        text = InternedText(name)
    }

    /// The vendor named `name` when this process has made a name of that text (a vendor's, or
    /// any other); nil otherwise, when nothing the process holds can be of that vendor. For
    /// reads, which must not add names to the process's ``InternedText``s.
    public init?(known name: String) {
        guard let text = InternedText.existing(name) else { return nil }
        self.text = text
    }

    public static func == (lhs: Vendor, rhs: Vendor) -> Bool { lhs.text == rhs.text }

    public func hash(into hasher: inout Hasher) { hasher.combine(text) }

    public var description: String { name }

    public static func < (lhs: Vendor, rhs: Vendor) -> Bool { lhs.text < rhs.text }
}

extension Vendor: Internable {
    var internHash: UInt64 { text.textHash }
}
