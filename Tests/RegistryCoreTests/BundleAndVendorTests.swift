import Testing
@testable import RegistryCore

@Suite struct BundleIDTests {
    @Test func normalisesCase() throws {
        #expect(try BundleID(parsing: "Com.Vendor.App-1").value == "com.vendor.app-1")
    }

    @Test(arguments: [
        ("", "empty"), ("com", "at least 2 labels"), ("com..app", "empty label"), (".com.app", "empty label"),
        ("com.app.", "empty label"), ("com.ven dor", "character"), ("com.vendor_x", "character"), ("com.véndor", "character"),
        (String(repeating: "a.", count: 128), "bytes"),
    ])
    func rejects(_ text: String, reason: String) {
        do {
            _ = try BundleID(parsing: text)
            Issue.record("accepted \(text)")
        } catch {
            guard case .invalidBundleID(let message) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(message.contains(reason), "\(message)")
        }
    }

    @Test func acceptsExactly255Bytes() throws {
        let text = "a." + String(repeating: "b", count: 253)
        #expect(text.utf8.count == 255)
        #expect(try BundleID(parsing: text).value == text)
    }

    @Test func labelPrefixMatchesWholeLabels() throws {
        let bundle = try BundleID(parsing: "com.acmecorp.app")
        #expect(!bundle.hasLabelPrefix("com.acme"))
        #expect(bundle.hasLabelPrefix("com.acmecorp"))
        #expect(try BundleID(parsing: "com.acme").hasLabelPrefix("com.acme"))
    }
}

@Suite struct VendorRulesTests {
    func vendor(_ bundle: String, _ rules: VendorRules) throws -> String {
        rules.vendor(of: try BundleID(parsing: bundle)).name
    }

    @Test func defaultDepthIsTwoLabels() throws {
        let rules = try VendorRules()
        #expect(try vendor("com.vendor.app1", rules) == "com.vendor")
        #expect(try vendor("com.vendor.app2", rules) == "com.vendor")
        #expect(try vendor("com.vendor", rules) == "com.vendor")
        #expect(try vendor("uk.co.bbc.iplayer", rules) == "uk.co")
    }

    @Test func longestPrefixRuleWins() throws {
        let rules = try VendorRules(rules: [
            VendorRule(name: nil, prefixes: ["uk.co.bbc"]),
            VendorRule(name: "acme", prefixes: ["com.acme", "net.acmecdn"]),
            VendorRule(name: "acme-labs", prefixes: ["com.acme.labs"]),
        ])
        #expect(try vendor("uk.co.bbc.iplayer", rules) == "uk.co.bbc")
        #expect(try vendor("uk.co.itv.hub", rules) == "uk.co")
        #expect(try vendor("com.acme.shop", rules) == "acme")
        #expect(try vendor("net.acmecdn.player", rules) == "acme")
        #expect(try vendor("com.acme.labs.beta", rules) == "acme-labs")
        #expect(try vendor("com.acmecorp.app", rules) == "com.acmecorp")
        #expect(try rules.vendor(named: "ACME").name == "acme")
        #expect(try rules.vendor(named: "com.other").name == "com.other")
        #expect(throws: IdentityError.self) { try rules.vendor(named: "com") }
        #expect(throws: IdentityError.self) { try rules.vendor(named: "com.a.b") }
    }

    @Test func refusesAmbiguousOrCollidingRules() {
        #expect(throws: IdentityError.self) { try VendorRule(name: "x", prefixes: []) }
        #expect(throws: IdentityError.self) { try VendorRule(name: "x", prefixes: ["com"]) }
        #expect(throws: IdentityError.self) { try VendorRule(name: "com.other", prefixes: ["com.acme"]) }
        #expect(throws: IdentityError.self) { try VendorRule(name: "bad name", prefixes: ["com.acme"]) }
        #expect(throws: IdentityError.self) {
            try VendorRules(rules: [VendorRule(name: "a", prefixes: ["com.x"]), VendorRule(name: "b", prefixes: ["com.x"])])
        }
        #expect(throws: IdentityError.self) {
            try VendorRules(rules: [VendorRule(name: "a", prefixes: ["com.x"]), VendorRule(name: "a", prefixes: ["com.y"])])
        }
    }
}

/// Vendor rules are named by a fingerprint that peers compare.
@Suite struct VendorRulesFingerprintTests {
    @Test func equalRulesInAnyOrderShareAFingerprintAndOtherRulesDoNot() throws {
        let acme = try VendorRule(name: "acme", prefixes: ["com.acme", "net.acmecdn"])
        let bbc = try VendorRule(name: nil, prefixes: ["uk.co.bbc"])
        let one = try VendorRules(rules: [acme, bbc])
        let same = try VendorRules(rules: [bbc, try VendorRule(name: "acme", prefixes: ["net.acmecdn", "com.acme"])])
        #expect(one.fingerprint == same.fingerprint && one.fingerprint != 0)
        let others = [
            try VendorRules(rules: [acme]), try VendorRules(rules: [acme, bbc], defaultDepth: 3),
            try VendorRules(rules: [try VendorRule(name: "acme2", prefixes: ["com.acme", "net.acmecdn"]), bbc]), try VendorRules(),
        ]
        #expect(Set(others.map(\.fingerprint) + [one.fingerprint]).count == 5)
    }
}
