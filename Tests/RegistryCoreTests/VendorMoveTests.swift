import RegistryTestSupport
import Testing
@testable import RegistryCore

/// Vendor moves as values: which vendors moves join and the name they go by (``VendorAliases``),
/// against an oracle written apart, in every order; a move read back from the wire; and the move
/// a rule change plans (``VendorMove/planned(destinations:)``).
@Suite struct VendorMoveTests {
    static func change(_ name: String, moving from: [String], into: String, at millis: UInt64, on node: String = "node-a") -> VendorRuleChange {
        VendorRuleChange(
            kind: .set, name: name, rule: try! VendorRule(name: name, prefixes: ["com.\(name)"]), time: HLCTimestamp(millis: millis, counter: 0),
            origin: NodeID(trusted: node), move: VendorMove(from: from, into: into))
    }

    static func vendors(_ names: String...) -> Set<Vendor> { Set(names.map { Vendor(trusted: $0) }) }

    @Test func movesJoinVendorsForGoodUnderTheNameTheLatestMoveWentInto() {
        var history = VendorRuleHistory()
        history.insert(Self.change("acme", moving: ["com.acme", "com.acmecorp"], into: "acme", at: 10))
        #expect(history.aliases.canonical == ["com.acme": "acme", "com.acmecorp": "acme"])
        // A later move of the joined vendor renames it: every name of it now means the new one.
        history.insert(Self.change("brand", moving: ["acme"], into: "brand", at: 20))
        #expect(history.aliases.canonical == ["com.acme": "brand", "com.acmecorp": "brand", "acme": "brand"])
        // A move back does not part them: the vendor goes by the name it moved into last.
        history.insert(Self.change("acme", moving: ["brand"], into: "com.acme", at: 30))
        #expect(history.aliases.canonical == ["com.acmecorp": "com.acme", "acme": "com.acme", "brand": "com.acme"])
        #expect(history.aliases.name(of: "unrelated") == "unrelated" && history.aliases.aliases(of: "com.acme") == ["acme", "brand", "com.acmecorp"])
        // A change without a move leaves the aliases as they were.
        history.insert(VendorRuleChange(kind: .remove, name: "brand", rule: nil, time: HLCTimestamp(millis: 40, counter: 0), origin: NodeID(trusted: "node-b")))
        #expect(history.aliases.canonical.count == 3)
    }

    @Test func rulesFileABundleUnderTheVendorItsRulesVendorJoined() throws {
        var history = VendorRuleHistory()
        history.insert(Self.change("acme", moving: ["com.acmecorp"], into: "acme", at: 10))
        let rules = try VendorRules(rules: [], defaultScope: .labels(2), aliases: history.aliases)
        let bundle = try BundleID(parsing: "com.acmecorp.mail")
        #expect(rules.namedVendor(of: bundle).name == "com.acmecorp" && rules.vendor(of: bundle).name == "acme")
        #expect(try rules.vendor(named: "com.acmecorp").name == "acme")
        #expect(try rules.vendor(named: "com.other").name == "com.other")
    }

    /// Random moves among five names, held in random orders: the aliases are the oracle's, and
    /// the same whatever the order.
    @Test func aliasesDependOnTheSetOfMovesAloneAndAreTheOraclesInEveryOrder() {
        let names = ["a", "b", "c", "d", "e"]
        var joined = 0
        for seed in UInt64(1)...300 {
            var random = SplitMix64(seed: seed)
            var changes = [VendorRuleChange]()
            for index in 0..<Int(random.next() % 5 + 1) {
                let into = names[Int(random.next() % 5)]
                let from = names.filter { _ in random.next() % 3 == 0 }
                guard VendorMove(from: from, into: into) != nil else { continue }
                // Some changes share their HLC: their origins order them (one node never makes two
                // changes of one HLC).
                changes.append(Self.change("v\(index)", moving: from, into: into, at: random.next() % 3, on: "node-\(index)"))
            }
            let expected = VendorRuleOracle.aliases(changes)
            joined += expected.count
            for _ in 0..<4 {
                var history = VendorRuleHistory()
                for change in (changes + changes.prefix(2)).shuffled(using: &random) { history.insert(change) }
                #expect(history.aliases.canonical == expected, "seed \(seed)")
            }
        }
        #expect(joined > 300, "moves should join vendors")
    }

    @Test func aMoveReadFromTheWireIsCheckedAndABadOneRefused() throws {
        #expect(try VendorMove.reading(moved: [], into: "") == nil)
        #expect(try VendorMove.reading(moved: ["com.b", "com.a"], into: "acme") == VendorMove(from: ["com.a", "com.b"], into: "acme"))
        let bad: [([String], String, String)] = [
            (["com.a"], "", "no vendor name"),
            ([], "acme", "names no vendor to move"),
            (["com.a", "com.a"], "acme", "names a vendor twice"),
            (["acme"], "acme", "names no vendor to move"),
            (["Com.A"], "acme", "no vendor name"),
            (["com a"], "acme", "no vendor name"),
            (["com.a"], String(repeating: "x", count: BundleID.maxLength + 1), "no vendor name"),
        ]
        for (moved, into, text) in bad {
            #expect(throws: IdentityError.self, "\(moved) into \(into)") { try VendorMove.reading(moved: moved, into: into) }
            do {
                _ = try VendorMove.reading(moved: moved, into: into)
            } catch {
                #expect("\(error)".contains(text), "\(moved) into \(into): \(error)")
            }
        }
        // A seed never moves: a config file cannot move devices.
        #expect(throws: IdentityError.self) {
            try VendorRuleChange.reading(
                kind: .seed, name: "acme", prefixes: ["com.acme"], maxDevices: 1, activeWithinDays: 0, pastLimit: .reject,
                time: HLCTimestamp(millis: 1, counter: 0), origin: NodeID(trusted: "node-a"), moved: ["com.acme"], movedInto: "acme")
        }
    }

    @Test func aRuleChangePlansAMoveOfWholeVendorsIntoOne() throws {
        #expect(try VendorMove.planned(destinations: [:]) == nil)
        let joined = try VendorMove.planned(destinations: [
            Vendor(trusted: "com.acme"): Self.vendors("acme"), Vendor(trusted: "com.acmecorp"): Self.vendors("acme"),
        ])
        #expect(joined == VendorMove(from: ["com.acme", "com.acmecorp"], into: "acme"))
        // A vendor whose devices would part, or partly stay: refused.
        for destinations in [
            [Vendor(trusted: "acme"): Self.vendors("com.acme", "com.acmecorp")],
            [Vendor(trusted: "acme"): Self.vendors("acme", "games")],
        ] {
            #expect(throws: IdentityError.self) { try VendorMove.planned(destinations: destinations) }
        }
        // Devices of two vendors going into two others: two changes' worth, refused.
        #expect(throws: IdentityError.self) {
            try VendorMove.planned(destinations: [Vendor(trusted: "com.a"): Self.vendors("x"), Vendor(trusted: "com.b"): Self.vendors("y")])
        }
    }
}
