import Testing
@testable import RegistryCore

/// Replicas that apply the same operations in different orders, with repeats, must hold the
/// same state, and every merge set's root must be the one the written rule names.
///
/// The expected state is computed here, apart from the code under test: merge sets are the
/// connected components of "claimed the same identifier in the same vendor" and "named as merged
/// by one operation", and each set's winner is its minimum by (created HLC, origin node ID's
/// bytes, device ID's bytes), compared as plain tuples rather than through `winsMerge`.
@Suite struct MergeConvergenceTests {
    /// Operations as several nodes would produce them independently: each node registers random
    /// devices against its own state, so concurrent claims and merges across nodes occur.
    /// With `minted`, devices get the IDs a cluster mints (``DeviceID/new(for:at:key:using:)``):
    /// two nodes that each see the same IDFV first create the same device, with different
    /// created HLCs and origins.
    func registeredOperations(seed: UInt64, minted: Bool = false) throws -> [RegistrationOp] {
        let key = MintingKey(secret: "seed \(seed)")
        var generator = SplitMix64(seed: seed)
        let rules = try VendorRules()
        let nodes = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        var states = Array(repeating: RegistryState(), count: nodes.count)
        var clocks = Array(repeating: HybridLogicalClock(), count: nodes.count)
        let identifiers = (0..<12).map { _ in UUID128(high: generator.next() | 1, low: generator.next()) }
        var ops = [RegistrationOp]()
        for step in 0..<200 {
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
            // A wall clock that stands still for ten steps: nodes mint at equal (millis,
            // counter) timestamps, so created-HLC ties across nodes occur and origin breaks them.
            let now = clocks[node].tick(wallMillis: UInt64(1_000 + step / 10))
            let op = states[node].register(registration, at: now, origin: nodes[node]) { _ in
                minted ? DeviceID.new(for: registration, at: now, key: key, using: &generator) : DeviceID.mint(at: now, using: &generator)
            }.operation
            ops.append(op)
            // Sometimes a node hears of another node's operation (partial replication).
            if generator.next() % 4 == 0 { states[Int(generator.next() % 3)].apply(op) }
        }
        return ops
    }

    /// Operations made up directly, so that every tie of the rule occurs: devices share created
    /// timestamps across origins (origin decides) and within one origin (the ID bytes decide),
    /// which a real node's clock never produces.
    func tiedOperations(seed: UInt64) -> [RegistrationOp] {
        var generator = SplitMix64(seed: seed)
        let vendor = Vendor(trusted: "com.v")
        let bundle = try! BundleID(parsing: "com.v.app")
        let devices = (0..<16).map { _ in
            DeviceRef(
                id: DeviceID(UUID128(high: generator.next() % 4, low: generator.next())),
                created: HLCTimestamp(millis: 7 + generator.next() % 2, counter: UInt16(generator.next() % 2)),
                origin: NodeID(trusted: generator.next() % 2 == 0 ? "node-a" : "node-b"), vendor: vendor)
        }
        let identifiers = (0..<10).map { Identifier(kind: $0 % 2 == 0 ? .keychain : .idfv, value: UUID128(high: 9, low: UInt64($0) + 1)) }
        return (0..<40).map { step in
            let device = devices[Int(generator.next() % 16)]
            let claims = (0..<Int(generator.next() % 3)).map { _ in identifiers[Int(generator.next() % 10)] }
            let merged = generator.next() % 5 == 0 ? [devices[Int(generator.next() % 16)]] : []
            return RegistrationOp(
                device: device, bundle: bundle, claims: IdentifierList(Set(claims)), merged: merged,
                seen: HLCTimestamp(millis: 100 + UInt64(step), counter: 0))
        }
    }

    static let seeds = Array(1...300) as [UInt64]

    @Test func registeredOperationsConvergeInEveryOrderToTheRulesWinners() throws {
        var merges = 0
        var originTies = 0
        for seed in Self.seeds.prefix(150) {
            let ops = try registeredOperations(seed: seed)
            let oracle = ExpectedState(ops)
            merges += oracle.aliasCount
            originTies += oracle.tiesDecidedByOrigin
            try checkEveryOrder(ops, oracle: oracle, seed: seed)
        }
        #expect(merges > 0, "the workload should produce merges")
        #expect(originTies > 0, "some merge should be decided by origin, its created HLCs tied")
    }

    @Test func devicesCreatedOnSeveralNodesConvergeToTheirEarliestCreation() throws {
        var duplicateCreations = 0
        for seed in Self.seeds.prefix(150) {
            let ops = try registeredOperations(seed: seed, minted: true)
            let creations = Dictionary(grouping: ops.map(\.device), by: \.id).values
            duplicateCreations += creations.filter { Set($0.map(\.origin)).count > 1 }.count
            try checkEveryOrder(ops, oracle: ExpectedState(ops), seed: seed)
        }
        #expect(duplicateCreations > 0, "the workload should have several nodes create one device")
    }

    @Test func tiedOperationsConvergeInEveryOrderToTheRulesWinners() throws {
        var originTies = 0
        var idTies = 0
        for seed in Self.seeds {
            let ops = tiedOperations(seed: seed)
            let oracle = ExpectedState(ops)
            originTies += oracle.tiesDecidedByOrigin
            idTies += oracle.tiesDecidedByID
            try checkEveryOrder(ops, oracle: oracle, seed: seed)
        }
        #expect(originTies > 0 && idTies > 0, "ties decided by origin (\(originTies)) and by ID bytes (\(idTies)) should occur")
    }

    /// Applies `ops` in their order and in shuffled orders with repeats, and checks each replica
    /// against the oracle.
    func checkEveryOrder(_ ops: [RegistrationOp], oracle: ExpectedState, seed: UInt64) throws {
        var generator = SplitMix64(seed: seed &* 31)
        var reference = RegistryState()
        for op in ops { reference.apply(op) }
        try oracle.check(reference, seed: seed)
        let expected = reference.snapshot()
        #expect(reference.digest == reference.recomputedDigest(), "seed \(seed): the kept digest differs from the content's")
        for _ in 0..<3 {
            var shuffled = ops + ops.prefix(Int(generator.next() % 20))  // some delivered twice
            shuffled.shuffle(using: &generator)
            var replica = RegistryState()
            for op in shuffled { replica.apply(op) }
            #expect(replica.snapshot() == expected, "seed \(seed): a delivery order changed the state")
            #expect(replica.digest == reference.digest, "seed \(seed): a delivery order changed the digest")
        }
    }

    /// The case that made claim owners depend on delivery order: device M, created on two nodes,
    /// claims K in its later creation; B, created between M's two creations, claims K too. A
    /// replica that hears M's later creation, then B, then M's earlier creation gave K to B (B
    /// won against M as M stood then); one that heard M's earlier creation first kept K for M.
    @Test func aClaimKeepsItsOwnerWhenADeviceMovesEarlierAfterLosingIt() {
        let vendor = Vendor(trusted: "com.v")
        let bundle = try! BundleID(parsing: "com.v.app")
        let k = Identifier(kind: .keychain, value: UUID128(high: 7, low: 7))
        let idfv = Identifier(kind: .idfv, value: UUID128(high: 8, low: 8))
        let m = DeviceID(UUID128(high: 1, low: 0))
        let b = DeviceID(UUID128(high: 2, low: 0))
        func op(_ id: DeviceID, created: UInt64, origin: String, claims: IdentifierList) -> RegistrationOp {
            let ref = DeviceRef(id: id, created: HLCTimestamp(millis: created, counter: 0), origin: NodeID(trusted: origin), vendor: vendor)
            return RegistrationOp(device: ref, bundle: bundle, claims: claims, merged: [], seen: HLCTimestamp(millis: 100 + created, counter: 0))
        }
        let mLate = op(m, created: 5, origin: "node-a", claims: [idfv, k])
        let bMiddle = op(b, created: 3, origin: "node-b", claims: [k])
        let mEarly = op(m, created: 1, origin: "node-c", claims: [idfv])
        var first = RegistryState()
        for op in [mLate, bMiddle, mEarly] { first.apply(op) }
        var second = RegistryState()
        for op in [mEarly, mLate, bMiddle] { second.apply(op) }
        #expect(first.snapshot() == second.snapshot())
        #expect(first.digest == second.digest)
        #expect(first.snapshot().claims[RegistryState.Snapshot.Claim(vendor: vendor, identifier: k)] == m, "the claimant with the lower ID")
        #expect(first.canonical(of: b) == m && second.canonical(of: b) == m)
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

/// What applying a set of operations must give, worked out from the operations alone.
struct ExpectedState {
    /// Every device named, to the winner of its merge set.
    private(set) var winner: [DeviceID: DeviceRef] = [:]
    /// Every claim to the winner of the set that claimed it.
    private(set) var claims: [RegistryState.Snapshot.Claim: DeviceID] = [:]
    /// Every claim to its owner: of the devices that claimed it, the one whose ID's bytes come
    /// first.
    private(set) var owners: [RegistryState.Snapshot.Claim: DeviceID] = [:]
    /// Every device to its earliest creation.
    private(set) var creations: [DeviceID: DeviceRef] = [:]
    private(set) var aliasCount = 0
    /// Merge sets whose two best devices tied on created HLC (origin decided), and on
    /// created HLC and origin (the ID bytes decided).
    private(set) var tiesDecidedByOrigin = 0
    private(set) var tiesDecidedByID = 0

    init(_ ops: [RegistrationOp]) {
        var devices = [DeviceID: DeviceRef]()
        var edges = [DeviceID: Set<DeviceID>]()
        var claimants = [RegistryState.Snapshot.Claim: [DeviceID]]()
        func connect(_ a: DeviceID, _ b: DeviceID) {
            edges[a, default: []].insert(b)
            edges[b, default: []].insert(a)
        }
        // A device created on several nodes ranks by its earliest creation.
        func note(_ ref: DeviceRef) {
            if let known = devices[ref.id], !(Self.rank(ref) < Self.rank(known)) { return }
            devices[ref.id] = ref
        }
        for op in ops {
            note(op.device)
            edges[op.device.id, default: []].insert(op.device.id)
            for identifier in op.claims {
                claimants[RegistryState.Snapshot.Claim(vendor: op.device.vendor, identifier: identifier), default: []].append(op.device.id)
            }
            for other in op.merged {
                note(other)
                connect(op.device.id, other.id)
            }
        }
        for (_, ids) in claimants {
            for id in ids.dropFirst() { connect(ids[0], id) }
        }
        // Connected components, each ranked by the rule as a plain tuple.
        var seen = Set<DeviceID>()
        for start in devices.keys where !seen.contains(start) {
            var component = [start]
            seen.insert(start)
            var index = 0
            while index < component.count {
                for next in edges[component[index]] ?? [] where seen.insert(next).inserted { component.append(next) }
                index += 1
            }
            let ranked = component.map { devices[$0]! }.sorted { Self.rank($0) < Self.rank($1) }
            for id in component { winner[id] = ranked[0] }
            aliasCount += component.count - 1
            if ranked.count > 1 {
                let (first, second) = (Self.rank(ranked[0]), Self.rank(ranked[1]))
                if first.created == second.created {
                    if first.origin != second.origin { tiesDecidedByOrigin += 1 } else { tiesDecidedByID += 1 }
                }
            }
        }
        for (key, ids) in claimants {
            claims[key] = winner[ids[0]]!.id
            owners[key] = ids.min { Self.bytes($0).lexicographicallyPrecedes(Self.bytes($1)) }
        }
        creations = devices
    }

    /// The rule's order: created HLC, then the origin node ID's bytes, then the device ID's
    /// 16 big-endian bytes.
    struct Rank: Comparable {
        let created: UInt64
        let origin: [UInt8]
        let id: [UInt8]

        static func < (a: Rank, b: Rank) -> Bool {
            if a.created != b.created { return a.created < b.created }
            if a.origin != b.origin { return a.origin.lexicographicallyPrecedes(b.origin) }
            return a.id.lexicographicallyPrecedes(b.id)
        }
    }

    static func rank(_ ref: DeviceRef) -> Rank {
        Rank(created: ref.created.rawValue, origin: Array(ref.origin.value.utf8), id: bytes(ref.id))
    }

    /// A device ID's 16 big-endian bytes.
    static func bytes(_ id: DeviceID) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: id.uuid.high >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: id.uuid.low >> (56 - 8 * $0)) }
    }

    /// Checks every invariant of the design brief's section 3 that one replica can show.
    func check(_ state: RegistryState, seed: UInt64) throws {
        let snapshot = state.snapshot()
        #expect(state.aliasCount == aliasCount, "seed \(seed): alias count")
        for (id, expected) in winner {
            // Every device ever named still resolves, to the winner the rule names.
            let root = try #require(state.canonical(of: id), "seed \(seed): \(id) no longer resolves")
            #expect(root == expected.id, "seed \(seed): \(id) resolves to \(root), the rule names \(expected.id)")
            // One hop, no cycles: the root is its own root.
            #expect(state.canonical(of: root) == root)
        }
        var members = [DeviceID: Set<DeviceID>]()
        for (id, expected) in winner where id != expected.id { members[expected.id, default: []].insert(id) }
        for (root, aliases) in members {
            #expect(Set(snapshot.records[root]?.aliases ?? []) == aliases, "seed \(seed): aliases of \(root)")
        }
        for (key, expected) in claims {
            let record = state.lookup(vendor: key.vendor, identifier: key.identifier)
            #expect(record?.device.id == expected, "seed \(seed): \(key) resolves to \(String(describing: record?.device.id))")
        }
        // Full state: every claim's owner, and every device's own creation, aliases included.
        #expect(snapshot.claims == owners, "seed \(seed): claim owners")
        #expect(snapshot.devices.mapValues(\.ref) == creations, "seed \(seed): devices' creations")
    }
}
