import Testing
@testable import RegistryCore

/// A single-node registry driven through the pure core: deterministic clock and IDs.
struct CoreHarness {
    var state = RegistryState()
    var clock = HybridLogicalClock()
    var wall: UInt64 = 1_700_000_000_000
    var generator = SplitMix64(seed: 99)
    var rules: VendorRules
    let origin = NodeID(trusted: "node-a")

    init(rules: VendorRules? = nil) {
        self.rules = rules ?? (try! VendorRules())
    }

    mutating func register(_ bundle: String, keychain: String? = nil, idfv: String? = nil) throws -> RegistrationOutcome {
        var presented = [PresentedIdentifier]()
        if let keychain { presented.append(PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, text: keychain)) }
        if let idfv { presented.append(PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, text: idfv)) }
        let registration = try Registration(bundle: bundle, identifiers: presented, rules: rules)
        wall += 1
        let now = clock.tick(wallMillis: wall)
        var generator = self.generator
        defer { self.generator = generator }
        return state.register(registration, at: now, origin: origin) { _ in DeviceID.mint(at: now, using: &generator) }.outcome
    }
}

let idfv1 = "11111111-1111-4111-8111-111111111111"
let idfv2 = "22222222-2222-4222-8222-222222222222"
let key1 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
let key2 = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"

@Suite struct IdentityRuleTests {
    @Test func siblingAppsWithTheSameIDFVGetOneID() throws {
        var h = CoreHarness()
        let a = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        let b = try h.register("com.v.b", idfv: idfv1)
        #expect(a.created && !b.created)
        #expect(a.device == b.device)
        #expect(a.vendor.name == "com.v")
        let record = try #require(h.state.resolve(a.device))
        #expect(record.apps.map(\.bundle.value) == ["com.v.a", "com.v.b"])
    }

    @Test func anotherVendorWithTheSameIDFVGetsAnotherID() throws {
        var h = CoreHarness()
        let a = try h.register("com.v.a", idfv: idfv1)
        let b = try h.register("com.other.a", idfv: idfv1)
        #expect(b.created)
        #expect(a.device != b.device)
        #expect(h.state.deviceCount == 2)
    }

    @Test func reinstallWithKeychainAndNewIDFVKeepsTheID() throws {
        var h = CoreHarness()
        let first = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        // Every app of the vendor was removed: the IDFV changed, the keychain survived.
        let again = try h.register("com.v.a", keychain: key1, idfv: idfv2)
        #expect(again.device == first.device && !again.created && again.replaced.isEmpty)
        #expect(h.state.lookup(vendor: first.vendor, identifier: Identifier(kind: .idfv, value: UUID128(text: idfv2)!))?.device.id == first.device)
    }

    @Test func lostKeychainWithSameIDFVKeepsTheIDAndClaimsTheNewKeychain() throws {
        var h = CoreHarness()
        let first = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        let again = try h.register("com.v.b", keychain: key2, idfv: idfv1)
        #expect(again.device == first.device && !again.created)
        let byNewKey = try h.register("com.v.c", keychain: key2)
        #expect(byNewKey.device == first.device)
    }

    @Test func nilIDFVBeforeFirstUnlockIsCompletedLater() throws {
        var h = CoreHarness()
        let early = try h.register("com.v.a", keychain: key1)
        let later = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        #expect(later.device == early.device)
        let sibling = try h.register("com.v.b", idfv: idfv1)
        #expect(sibling.device == early.device)
    }

    @Test func twoDevicesLinkedByALaterRequestAreMergedUnderTheRuleWinner() throws {
        var h = CoreHarness()
        let byKey = try h.register("com.v.a", keychain: key1)
        let byIDFV = try h.register("com.v.b", idfv: idfv1)
        #expect(byKey.device != byIDFV.device)
        let linked = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        // byKey was created first (smaller HLC), so the rule names it the winner.
        #expect(linked.device == byKey.device)
        #expect(linked.replaced == [byIDFV.device])
        let loser = try #require(h.state.resolve(byIDFV.device))
        #expect(loser.device.id == byKey.device)
        #expect(loser.aliases == [byIDFV.device])
        #expect(loser.apps.map(\.bundle.value) == ["com.v.a", "com.v.b"])
        #expect(h.state.deviceCount == 1 && h.state.aliasCount == 1)
        // Later requests through the loser's identifier still report it as replaced.
        let viaLoser = try h.register("com.v.b", idfv: idfv1)
        #expect(viaLoser.device == byKey.device && viaLoser.replaced == [byIDFV.device])
    }

    @Test func vendorRulesGroupPrefixes() throws {
        let rules = try VendorRules(rules: [
            VendorRule(name: "acme", prefixes: ["com.acme", "net.acmecdn"]),
            VendorRule(name: nil, prefixes: ["uk.co.bbc"]),
        ])
        var h = CoreHarness(rules: rules)
        let shop = try h.register("com.acme.shop", idfv: idfv1)
        let player = try h.register("net.acmecdn.player", idfv: idfv1)
        #expect(shop.device == player.device && shop.vendor.name == "acme")
        let bbc = try h.register("uk.co.bbc.iplayer", idfv: idfv1)
        let itv = try h.register("uk.co.itv.hub", idfv: idfv1)
        #expect(bbc.vendor.name == "uk.co.bbc" && itv.vendor.name == "uk.co")
        #expect(bbc.device != itv.device && bbc.device != shop.device)
    }

    @Test func rejectedIdentifiersAreIgnoredWhileAValidOneRemains() throws {
        var h = CoreHarness()
        let zero = "00000000-0000-0000-0000-000000000000"
        let outcome = try h.register("com.v.a", keychain: key1, idfv: zero)
        #expect(outcome.rejected == [PresentedIdentifier(rawKind: 2, text: zero)])
        #expect(throws: IdentityError.invalidIdentifier("idfv is the all-zero UUID")) {
            _ = try h.register("com.v.a", idfv: zero)
        }
        #expect(throws: IdentityError.self) { _ = try h.register("com.v.a", idfv: "not-a-uuid") }
        #expect(throws: IdentityError.missingIdentifier) { _ = try h.register("com.v.a") }
        #expect(throws: IdentityError.self) { _ = try h.register("nodots", idfv: idfv1) }
        let unknownKind = [PresentedIdentifier(rawKind: 9, text: key1)]
        #expect(throws: IdentityError.invalidIdentifier("unknown identifier kind 9")) {
            _ = try Registration(bundle: "com.v.a", identifiers: unknownKind, rules: h.rules)
        }
        let twice = [PresentedIdentifier(rawKind: 2, text: idfv1), PresentedIdentifier(rawKind: 2, text: idfv2)]
        #expect(throws: IdentityError.invalidIdentifier("idfv appears more than once")) {
            _ = try Registration(bundle: "com.v.a", identifiers: twice, rules: h.rules)
        }
    }

    /// A registration keeps each valid identifier as the transform gives it back (the node's
    /// keyed hashing), sorted by kind as ever, and the rejected ones as presented.
    @Test func theTransformKeepsEachValidIdentifierAsItGivesItBack() throws {
        let zero = "00000000-0000-0000-0000-000000000000"
        let presented = [
            PresentedIdentifier(rawKind: 2, text: idfv1), PresentedIdentifier(rawKind: 1, text: key1), PresentedIdentifier(rawKind: 3, text: zero),
        ]
        let flip = { (identifier: Identifier) in
            Identifier(kind: identifier.kind, value: UUID128(high: ~identifier.value.high, low: identifier.value.low &+ 7))
        }
        var resolver = BundleResolver(rules: try VendorRules(), capacity: 0)
        let transformed = try Registration(bundle: "com.v.a", identifiers: presented, resolver: &resolver, transform: flip)
        let plain = try Registration(bundle: "com.v.a", identifiers: presented, rules: try VendorRules())
        #expect(transformed.bundle == plain.bundle && transformed.vendor == plain.vendor && Array(transformed.identifiers) == plain.identifiers.map(flip))
        #expect(transformed.identifiers.map(\.kind) == [.keychain, .idfv] && transformed.identifiers != plain.identifiers)
        #expect(transformed.rejected == [PresentedIdentifier(rawKind: 3, text: zero)])
    }

    @Test func identifiersAreCaseInsensitive() throws {
        var h = CoreHarness()
        let lower = try h.register("com.v.a", idfv: idfv1)
        let upper = try h.register("COM.V.B", idfv: idfv1.uppercased())
        #expect(lower.device == upper.device)
    }

    /// Issue 28's case: the app last told "your device is B" must be told when B is replaced.
    @Test func aMergeNamesThePreviousWinnerOfAnEarlierMerge() throws {
        var h = CoreHarness()
        let a = try h.register("com.v.a", keychain: key1)
        let b = try h.register("com.v.b", keychain: key2)
        let c = try h.register("com.v.c", idfv: idfv1)
        let bc = try h.register("com.v.b", keychain: key2, idfv: idfv1)
        #expect(bc.device == b.device && bc.replaced == [c.device])
        let all = try h.register("com.v.a", keychain: key1, idfv: idfv1)
        #expect(all.device == a.device)
        #expect(all.replaced == [b.device, c.device].sorted(), "B, which IC resolved to, and C, which claimed IC")
        // Later: the device that first claimed a presented identifier is named again, the
        // winner of the earlier merge only by the registration that merged it away.
        #expect(try h.register("com.v.c", idfv: idfv1).replaced == [c.device])
        #expect(try h.register("com.v.b", keychain: key2).replaced == [b.device])
        #expect(try h.register("com.v.a", keychain: key1).replaced == [])
    }

    /// Random merge chains. The test keeps its own model of which device each identifier
    /// resolves to, updated only from answers: the presented identifiers resolve to the answer,
    /// and so does every identifier that resolved to a device the answer lists as replaced.
    /// Every ID a presented identifier resolved to before a registration must be its answer or
    /// listed, and the model must match the registry's lookups after every step (which it cannot
    /// if an answer left out a device it merged away).
    @Test(arguments: Array(1...40) as [UInt64])
    func everyIDAnIdentifierResolvedToIsTheAnswerOrListedAsReplaced(seed: UInt64) throws {
        var h = CoreHarness()
        h.generator = SplitMix64(seed: seed)
        var random = SplitMix64(seed: seed &* 7919)
        let keychains = (0..<8).map { UUID128(high: 0xA0 + UInt64($0), low: seed | 1).text }
        let idfvs = (0..<8).map { UUID128(high: 0xB0 + UInt64($0), low: seed | 1).text }
        var resolves = [String: DeviceID]()
        var merges = 0
        for _ in 0..<60 {
            let keychain = random.next() % 3 == 0 ? nil : keychains[Int(random.next() % 8)]
            let idfv = keychain != nil && random.next() % 2 == 0 ? nil : idfvs[Int(random.next() % 8)]
            let presented = [keychain, idfv].compactMap { $0 }
            let outcome = try h.register("com.v.app\(random.next() % 3)", keychain: keychain, idfv: idfv)
            for identifier in presented {
                if let before = resolves[identifier] {
                    #expect(
                        before == outcome.device || outcome.replaced.contains(before),
                        "seed \(seed): \(identifier) resolved to \(before), now \(outcome.device), replaced \(outcome.replaced)")
                }
            }
            for (identifier, device) in resolves where outcome.replaced.contains(device) { resolves[identifier] = outcome.device }
            for identifier in presented { resolves[identifier] = outcome.device }
            for (identifier, device) in resolves {
                let kind: IdentifierKind = keychains.contains(identifier) ? .keychain : .idfv
                let found = h.state.lookup(vendor: outcome.vendor, identifier: Identifier(kind: kind, value: UUID128(text: identifier)!))
                #expect(found?.device.id == device, "seed \(seed): \(identifier) resolves to \(String(describing: found?.device.id)), answers said \(device)")
            }
            #expect(!outcome.replaced.contains(outcome.device))
            #expect(outcome.replaced == outcome.replaced.sorted())
            if !outcome.replaced.isEmpty { merges += 1 }
        }
        #expect(merges > 0, "seed \(seed) merged nothing")
    }
}
