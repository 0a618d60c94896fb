import RegistryTestSupport
import Testing
@testable import RegistryCore

/// The cluster's vendor rules (``VendorRuleHistory``): the rule of seeds, operator changes and
/// overlapping prefixes, against an oracle written apart, in every order.
@Suite struct VendorRuleHistoryTests {
    static func rule(_ name: String, _ prefixes: [String], maxDevices: Int = 1) -> VendorRule {
        try! VendorRule(name: name, prefixes: prefixes, binding: try! BindingPolicy(maxDevices: maxDevices))
    }

    static func change(_ kind: VendorRuleChange.Kind, _ name: String, _ prefixes: [String] = [], at millis: UInt64, on node: String = "node-a", maxDevices: Int = 1) -> VendorRuleChange {
        VendorRuleChange(
            kind: kind, name: name, rule: kind == .remove ? nil : rule(name, prefixes, maxDevices: maxDevices),
            time: HLCTimestamp(millis: millis, counter: 0), origin: NodeID(trusted: node))
    }

    @Test func theEarliestSeedCountsAndOperatorChangesOverrideIt() {
        var history = VendorRuleHistory()
        history.insert(Self.change(.seed, "acme", ["com.acme"], at: 10, on: "node-b"))
        history.insert(Self.change(.seed, "bbc", ["uk.co.bbc"], at: 10, on: "node-b"))
        // A node that started later with another file seeds too: ignored.
        history.insert(Self.change(.seed, "acme", ["com.acme", "net.acmecdn"], at: 50, on: "node-c"))
        history.insert(Self.change(.seed, "other", ["org.other"], at: 50, on: "node-c"))
        #expect(history.rules == [Self.rule("acme", ["com.acme"]), Self.rule("bbc", ["uk.co.bbc"])])
        // An operator's change of one seeded vendor replaces its rule and leaves the others.
        history.insert(Self.change(.set, "acme", ["com.acme", "net.acmecdn"], at: 15, on: "node-a", maxDevices: 3))
        #expect(history.rules == [Self.rule("acme", ["com.acme", "net.acmecdn"], maxDevices: 3), Self.rule("bbc", ["uk.co.bbc"])])
        history.insert(Self.change(.remove, "bbc", at: 60))
        #expect(history.rules == [Self.rule("acme", ["com.acme", "net.acmecdn"], maxDevices: 3)])
        // The latest operator change of a vendor wins.
        history.insert(Self.change(.set, "bbc", ["uk.co.bbc"], at: 70))
        #expect(history.rules.map(\.name) == ["acme", "bbc"])
    }

    @Test func aSeedLaterThanAnOperatorChangeIsIgnored() {
        // The cluster was set up by hand; a node that starts later with a file does not seed it.
        var history = VendorRuleHistory()
        history.insert(Self.change(.set, "hand", ["com.hand"], at: 5))
        history.insert(Self.change(.seed, "acme", ["com.acme"], at: 10, on: "node-c"))
        #expect(history.rules == [Self.rule("hand", ["com.hand"])])
        // A seed before it still counts.
        history.insert(Self.change(.seed, "early", ["com.early"], at: 4, on: "node-d"))
        #expect(history.rules.map(\.name) == ["early", "hand"])
    }

    @Test func twoRulesClaimingOnePrefixLeaveItToTheEarlierChange() {
        var history = VendorRuleHistory()
        history.insert(Self.change(.set, "late", ["com.shared", "com.late"], at: 20, on: "node-b"))
        history.insert(Self.change(.set, "early", ["com.shared"], at: 10, on: "node-a"))
        #expect(history.rules == [Self.rule("early", ["com.shared"]), Self.rule("late", ["com.late"])])
        // A rule left without prefixes is dropped; one named after a prefix it lost, too.
        history.insert(Self.change(.set, "com.late", ["com.late"], at: 30))
        #expect(history.rules.map(\.name) == ["early", "late"])
    }

    /// Random changes of a few vendors over a few prefixes from three nodes, seeds from several
    /// starts among them: every order gives the same rules, the oracle's.
    @Test func everyOrderGivesTheRulesTheOracleNames() {
        var random = SplitMix64(seed: 77)
        let names = ["acme", "bbc", "cdn", "com.p1", "com.p2"]
        let prefixes = ["com.p1", "com.p2", "com.p3", "net.p4"]
        var conflicts = 0
        for round in 0..<200 {
            var changes = [VendorRuleChange]()
            let seedStarts = (0..<Int(random.next() % 3)).map { _ in (UInt64(random.next() % 20), "node-\(random.next() % 3)") }
            for (millis, node) in seedStarts {
                for name in names where random.next() % 2 == 0 {
                    var own = prefixes.filter { _ in random.next() % 3 == 0 }
                    if name.contains(".") { own = [name] + own.filter { $0 != name } }
                    if own.isEmpty { own = [prefixes[Int(random.next() % 4)]] }
                    changes.append(Self.change(.seed, name, Array(Set(own)).sorted(), at: millis, on: node))
                }
            }
            for _ in 0..<Int(random.next() % 8) {
                let name = names[Int(random.next() % 5)]
                let at = UInt64(random.next() % 40)
                let node = "node-\(random.next() % 3)"
                if random.next() % 4 == 0 {
                    changes.append(Self.change(.remove, name, at: at, on: node))
                } else {
                    var own = prefixes.filter { _ in random.next() % 3 == 0 }
                    if name.contains(".") { own = [name] + own.filter { $0 != name } }
                    if own.isEmpty { own = [prefixes[Int(random.next() % 4)]] }
                    changes.append(Self.change(.set, name, Array(Set(own)).sorted(), at: at, on: node))
                }
            }
            let expected = VendorRuleOracle.rules(changes)
            if Set(changes.compactMap(\.rule).flatMap(\.prefixes)).count < changes.compactMap(\.rule).flatMap(\.prefixes).count { conflicts += 1 }
            for _ in 0..<3 {
                var history = VendorRuleHistory()
                for change in (changes + changes.prefix(2)).shuffled(using: &random) { history.insert(change) }
                #expect(history.rules == expected, "round \(round): \(changes.map { "\($0.kind) \($0.name) \($0.rule?.prefixes ?? []) \($0.time) \($0.origin)" })")
            }
        }
        #expect(conflicts > 0)
    }

    @Test func vendorRuleChangesConvergeInTheStateAndSurviveASnapshot() throws {
        var state = RegistryState()
        let changes = [
            Self.change(.seed, "acme", ["com.acme"], at: 1), Self.change(.set, "bbc", ["uk.co.bbc"], at: 2),
            Self.change(.remove, "acme", at: 3, on: "node-b"),
        ]
        for change in changes { state.apply(.vendorRule(change)) }
        state.apply(.vendorRule(changes[0]))
        #expect(state.vendorRuleChanges == 3 && state.vendorRuleHistory.rules == [Self.rule("bbc", ["uk.co.bbc"])])
        #expect(state.digest == state.recomputedDigest())
        var other = RegistryState()
        for change in changes.reversed() { other.apply(.vendorRule(change)) }
        #expect(other.digest == state.digest && other.snapshot() == state.snapshot())
        var restorer = RegistryState.Restorer()
        try state.forEachSnapshotRecord { try restorer.add($0) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == state.snapshot() && restored.digest == state.digest)
        #expect(restored.vendorRuleHistory.rules == state.vendorRuleHistory.rules)
    }
}
