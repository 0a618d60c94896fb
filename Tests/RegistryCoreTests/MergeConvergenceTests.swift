import Testing
@testable import RegistryCore

/// Replicas that apply the same operations in different orders, with repeats, must hold the
/// same state, and every merge set's root must be the one the written rule names.
@Suite struct MergeConvergenceTests {
    /// Operations as several nodes would produce them independently: each node registers random
    /// devices against its own state, so concurrent claims and merges across nodes occur.
    func operations(seed: UInt64) throws -> [RegistrationOp] {
        var generator = SplitMix64(seed: seed)
        let rules = try VendorRules()
        let nodes = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        var states = Array(repeating: RegistryState(), count: nodes.count)
        var clocks = Array(repeating: HybridLogicalClock(), count: nodes.count)
        let identifiers = (0..<12).map { _ in UUID128(high: generator.next() | 1, low: generator.next()) }
        var ops = [RegistrationOp]()
        for step in 0..<300 {
            let node = Int(generator.next() % 3)
            var presented = [PresentedIdentifier]()
            if generator.next() % 3 != 0 {
                presented.append(PresentedIdentifier(rawKind: 1, text: identifiers[Int(generator.next() % 12)].text))
            }
            if presented.isEmpty || generator.next() % 2 == 0 {
                presented.append(PresentedIdentifier(rawKind: 2, text: identifiers[Int(generator.next() % 12)].text))
            }
            let bundle = ["com.v.a", "com.v.b", "org.w.c"][Int(generator.next() % 3)]
            let registration = try Registration(bundle: bundle, identifiers: presented, rules: rules)
            // Coarse wall clock so that HLC ties across nodes happen and origin breaks them.
            let now = clocks[node].tick(wallMillis: UInt64(1_000 + step / 10))
            let op = states[node].register(registration, at: now, origin: nodes[node]) {
                DeviceID.mint(at: now, using: &generator)
            }.operation
            ops.append(op)
            // Sometimes a node hears of another node's operation (partial replication).
            if generator.next() % 4 == 0 { states[Int(generator.next() % 3)].apply(op) }
        }
        return ops
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func everyDeliveryOrderConverges(seed: UInt64) throws {
        let ops = try operations(seed: seed)
        var reference = RegistryState()
        for op in ops { reference.apply(op) }
        let expected = reference.snapshot()
        #expect(reference.aliasCount > 0, "the workload should produce merges")

        var generator = SplitMix64(seed: seed &* 31)
        for _ in 0..<5 {
            var shuffled = ops + ops.prefix(Int(generator.next() % 50))  // some delivered twice
            shuffled.shuffle(using: &generator)
            var replica = RegistryState()
            for op in shuffled { replica.apply(op) }
            #expect(replica.snapshot() == expected)
        }
        try checkInvariants(reference, ops: ops)
    }

    func checkInvariants(_ state: RegistryState, ops: [RegistrationOp]) throws {
        let snapshot = state.snapshot()
        var members = [DeviceID: [DeviceRef]]()
        for op in ops {
            for ref in [op.device] + op.merged {
                // Every device ever named still resolves.
                let root = try #require(state.canonical(of: ref.id))
                // One hop: the root is its own root.
                #expect(state.canonical(of: root) == root)
                if !(members[root]?.contains(ref) ?? false) { members[root, default: []].append(ref) }
            }
        }
        for (root, refs) in members {
            // The root is the minimum by (created HLC, origin, ID bytes) of its set.
            let winner = refs.dropFirst().reduce(refs[0]) { $1.winsMerge(against: $0) ? $1 : $0 }
            #expect(winner.id == root)
            #expect(Set(snapshot.records[root]!.aliases) == Set(refs.map(\.id)).subtracting([root]))
        }
    }

    @Test func mergeWinnerBreaksTiesByOriginThenID() {
        let vendor = Vendor(trusted: "com.v")
        let t = HLCTimestamp(millis: 5, counter: 0)
        let lowID = DeviceID(UUID128(high: 1, low: 0))
        let highID = DeviceID(UUID128(high: 2, low: 0))
        let a = DeviceRef(id: highID, created: t, origin: NodeID(trusted: "a"), vendor: vendor)
        let b = DeviceRef(id: lowID, created: t, origin: NodeID(trusted: "b"), vendor: vendor)
        #expect(a.winsMerge(against: b) && !b.winsMerge(against: a))
        let c = DeviceRef(id: lowID, created: t, origin: NodeID(trusted: "a"), vendor: vendor)
        #expect(c.winsMerge(against: a))
        let older = DeviceRef(id: highID, created: HLCTimestamp(millis: 4, counter: 9), origin: NodeID(trusted: "z"), vendor: vendor)
        #expect(older.winsMerge(against: c))
    }
}
