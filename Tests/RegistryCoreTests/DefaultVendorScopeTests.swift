import Foundation
import Testing
@testable import RegistryCore

/// The default vendor of a bundle no rule matches (``DefaultVendorScope``), and the pin that keeps
/// a node on the scope its devices were filed under (``DefaultScopePin``).
@Suite struct DefaultVendorScopeTests {
    static let list = try! PublicSuffixList(parsing: "com\nuk\nco.uk\nio\ngithub.io\n*.ck\n!www.ck")

    func vendor(_ bundle: String, _ rules: VendorRules) throws -> String {
        rules.vendor(of: try BundleID(parsing: bundle)).name
    }

    @Test func thePublicSuffixListNamesTheVendorOfABundleNoRuleMatches() throws {
        let rules = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["uk.co.acme"])], defaultScope: .publicSuffix(Self.list))
        #expect(try vendor("uk.co.bbc.iplayer", rules) == "uk.co.bbc")
        #expect(try vendor("uk.co.tesco.app", rules) == "uk.co.tesco")
        #expect(try vendor("com.acme.mail", rules) == "com.acme")
        #expect(try vendor("io.github.someone.app", rules) == "io.github.someone")
        #expect(try vendor("ck.foo.bar.app", rules) == "ck.foo.bar")
        // A rule still prevails over the list.
        #expect(try vendor("uk.co.acme.mail", rules) == "acme")
        // Two labels is as short as a bundle ID gets; one that is all suffix is its own vendor.
        #expect(try vendor("uk.co", rules) == "uk.co")
    }

    @Test func aVendorNamedByTheListIsAcceptedAndOneItWouldNotNameIsRefused() throws {
        let rules = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["uk.co.acme"])], defaultScope: .publicSuffix(Self.list))
        #expect(try rules.vendor(named: "UK.co.BBC").name == "uk.co.bbc")
        #expect(try rules.vendor(named: "com.acme").name == "com.acme")
        #expect(try rules.vendor(named: "acme").name == "acme")
        for name in ["uk.co", "uk.co.bbc.iplayer", "com.acme.mail", "bbc", "com"] {
            #expect(throws: IdentityError.self, "\(name)") { try rules.vendor(named: name) }
        }
        // A rule one label below a vendor (Debian's list has app.lmpm.com) leaves the vendor a
        // vendor of every other app below it.
        let below = try VendorRules(defaultScope: .publicSuffix(try PublicSuffixList(parsing: "com\napp.lmpm.com")))
        #expect(try vendor("com.lmpm.mail", below) == "com.lmpm")
        #expect(try below.vendor(named: "com.lmpm").name == "com.lmpm")
        #expect(try vendor("com.lmpm.app.shop.mail", below) == "com.lmpm.app.shop")
        #expect(try below.vendor(named: "com.lmpm.app.shop").name == "com.lmpm.app.shop")
        #expect(throws: IdentityError.self) { try below.vendor(named: "com.lmpm.app") }
        let depth = try VendorRules(defaultDepth: 2)
        #expect(try depth.vendor(named: "uk.co").name == "uk.co")
        #expect(throws: IdentityError.self) { try depth.vendor(named: "uk.co.bbc") }
    }

    @Test func theScopeIsPartOfTheFingerprintAndADepthKeepsTheFingerprintItHadBeforeLists() throws {
        let two = try VendorRules(defaultDepth: 2)
        let listed = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let other = try VendorRules(defaultScope: .publicSuffix(try PublicSuffixList(parsing: "com\nuk\nco.uk")))
        #expect(Set([two.defaultScopeFingerprint, listed.defaultScopeFingerprint, other.defaultScopeFingerprint]).count == 3)
        // The value peers of the version before compared: the depth line alone.
        #expect(two.defaultScopeFingerprint == max(StateDigest.text("depth=2\n"), 1))
        #expect(listed == (try VendorRules(defaultScope: .publicSuffix(try PublicSuffixList(parsing: Self.list.ruleText)))))
    }

    /// What a pin keeps reads back into the same rules, for Debian's whole list too.
    @Test func aListsRuleTextReadsBackIntoAnEqualList() throws {
        let text = try String(contentsOfFile: "/usr/share/publicsuffix/public_suffix_list.dat", encoding: .utf8)
        let debian = try PublicSuffixList(parsing: text)
        let again = try PublicSuffixList(parsing: debian.ruleText)
        #expect(again == debian && again.fingerprint == debian.fingerprint && again.ruleCount == debian.ruleCount)
    }

    // MARK: - The pin

    /// A state with devices of `bundles`, filed under `rules`.
    func state(_ bundles: [String], rules: VendorRules) throws -> RegistryState {
        var harness = CoreHarness(rules: rules)
        for (index, bundle) in bundles.enumerated() {
            _ = try harness.register(bundle, idfv: String(format: "%08x-1111-4111-8111-111111111111", index + 1))
        }
        return harness.state
    }

    @Test func aNewDirectoryPinsTheConfiguredScope() throws {
        let configured = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let pin = try DefaultScopePin(pinned: nil, configured: configured, state: RegistryState())
        #expect(pin.rules == configured && pin.writesPin && pin.outcome == .pinned)
    }

    @Test func aDirectoryFromBeforePinsKeepsTheDepthItServedWhenTheListWouldMoveItsDevices() throws {
        let held = try state(["uk.co.bbc.iplayer", "com.acme.mail"], rules: try VendorRules(defaultDepth: 2))
        let configured = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let pin = try DefaultScopePin(pinned: nil, configured: configured, state: held)
        #expect(pin.rules.defaultScope == .labels(2) && pin.writesPin)
        guard case .kept(_, let devices, let bundles) = pin.outcome else {
            Issue.record("\(pin.outcome)")
            return
        }
        #expect(devices == 1 && bundles.map(\.value) == ["uk.co.bbc.iplayer"])
    }

    /// A directory that holds only what is not a device (a binding, a tombstone, a member) still
    /// served a default, so it is not taken for a new one.
    @Test func aDirectoryHoldingOnlyBindingsTombstonesOrMembersIsNotNew() throws {
        let configured = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let stamp = HLCTimestamp(millis: 1_800_000_000_000, counter: 0)
        let node = NodeID(trusted: "node-a")
        var bound = RegistryState()
        bound.apply(
            BindingChange(
                kind: .bind, vendor: Vendor(trusted: "com.acme"), account: UUID128(high: 1, low: 2), device: DeviceID(UUID128(high: 3, low: 4)),
                time: stamp, origin: node))
        var forgotten = RegistryState()
        forgotten.apply(ForgetOp(device: DeviceID(UUID128(high: 5, low: 6)), vendor: Vendor(trusted: "com.acme")))
        var joined = RegistryState()
        joined.apply(MembershipOp(node: node, address: "127.0.0.1:7400", removed: false, at: stamp))
        for state in [bound, forgotten, joined] {
            let pin = try DefaultScopePin(pinned: nil, configured: configured, state: state)
            // Nothing held moves, so the configured list is taken, after the earlier depth was
            // considered rather than a new directory's pin.
            #expect(pin.outcome == .replaced(previous: .labels(2)) && pin.writesPin, "\(pin.outcome)")
        }
    }

    @Test func aScopeThatMovesNoDeviceHeldReplacesThePin() throws {
        // Only bundles both scopes file alike: com.acme.* is com.acme either way.
        let held = try state(["com.acme.mail", "com.acme.news"], rules: try VendorRules(defaultDepth: 2))
        let configured = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let pin = try DefaultScopePin(pinned: .labels(2), configured: configured, state: held)
        #expect(pin.rules == configured && pin.writesPin && pin.outcome == .replaced(previous: .labels(2)))
    }

    @Test func aNewerListThatWouldMoveADeviceLeavesThePinAndCountsTheDevices() throws {
        let old = try VendorRules(defaultScope: .publicSuffix(Self.list))
        let held = try state(["uk.co.bbc.iplayer", "uk.co.bbc.news", "uk.ltd.shop.app", "com.acme.mail"], rules: old)
        // The newer list adds ltd.uk: uk.ltd.shop.app would move from uk.ltd to uk.ltd.shop.
        let newer = try PublicSuffixList(parsing: Self.list.ruleText + "ltd.uk\n")
        let pin = try DefaultScopePin(pinned: Self.list.asScope, configured: try old.with(defaultScope: .publicSuffix(newer)), state: held)
        #expect(pin.rules == old && !pin.writesPin)
        #expect(pin.outcome == .kept(configured: .publicSuffix(newer), devices: 1, bundles: [try BundleID(parsing: "uk.ltd.shop.app")]))
        // Pinned and configured the same: nothing to say or write.
        let same = try DefaultScopePin(pinned: Self.list.asScope, configured: old, state: held)
        #expect(same.outcome == .same && !same.writesPin && same.rules == old)
    }

    /// The devices counted are those the cluster's rules file by default: a rule that covers a
    /// bundle keeps it where it is whatever the list says.
    @Test func bundlesUnderTheClustersRulesDoNotCount() throws {
        let history = VendorRuleChange(
            kind: .set, name: "shop", rule: try VendorRule(name: "shop", prefixes: ["uk.ltd.shop"]), time: HLCTimestamp(rawValue: 1 << 20),
            origin: NodeID(trusted: "node-a"))
        var held = try state(["uk.ltd.shop.app"], rules: try VendorRules(rules: [try #require(history.rule)], defaultScope: Self.list.asScope))
        held.apply(history)
        let newer = try PublicSuffixList(parsing: Self.list.ruleText + "ltd.uk\n")
        let pin = try DefaultScopePin(pinned: Self.list.asScope, configured: try VendorRules(defaultScope: .publicSuffix(newer)), state: held)
        #expect(pin.outcome == .replaced(previous: Self.list.asScope) && pin.rules.defaultScope == .publicSuffix(newer))
    }
}

extension PublicSuffixList {
    var asScope: DefaultVendorScope { .publicSuffix(self) }
}
