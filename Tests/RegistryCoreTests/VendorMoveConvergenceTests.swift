import RegistryTestSupport
import Testing
@testable import RegistryCore

/// Operations as three nodes make them when they register, bind, forget and change the vendor
/// rules against their own states, moving devices when a change needs it, and hear of each
/// other's operations only now and then: registrations made under a vendor before its move
/// arrive after it, and moves arrive after the devices they move.
struct VendorMoveWorkload {
    private(set) var operations: [Operation] = []
    /// Rule changes that carried a move.
    private(set) var moves = 0
    /// What each registration answered: the device, and the devices it said were merged into it.
    private(set) var answers: [(device: DeviceID, replaced: [DeviceID])] = []

    init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let key = MintingKey(secret: "seed \(seed)")
        let nodes = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        var states = Array(repeating: RegistryState(), count: 3)
        var clocks = Array(repeating: HybridLogicalClock(), count: 3)
        let identifiers = (0..<6).map { _ in UUID128(high: random.next() | 1, low: random.next()) }
        // The rule changes the nodes try: vendors that take two default vendors' bundles, and
        // their removal, which sends the bundles back.
        let candidates: [(name: String, prefixes: [String]?)] = [
            ("ab", ["com.a", "com.b"]), ("bc", ["com.b", "com.c"]), ("a", ["com.a"]), ("ab", nil), ("bc", nil), ("a", nil),
        ]
        for step in 0..<160 {
            let node = Int(random.next() % 3)
            let now = clocks[node].tick(wallMillis: UInt64(1_000 + step / 8))
            let history = states[node].vendorRuleHistory
            let rules = try! VendorRules(rules: history.rules, defaultScope: .labels(2), aliases: history.aliases)
            let roll = random.next() % 10
            var operation: Operation?
            if roll < 6 || states[node].deviceCount == 0 {
                let presented = ConvergenceWorkloads.presented(from: identifiers, using: &random)
                let bundle = ["com.a.mail", "com.b.maps", "com.c.tv"][Int(random.next() % 3)]
                let registration = try! Registration(bundle: bundle, identifiers: presented, rules: rules)
                let (op, outcome) = states[node].register(registration, at: now, origin: nodes[node]) { generation in
                    DeviceID.new(for: registration, at: now, generation: generation, key: key, using: &random)
                }
                answers.append((outcome.device, outcome.replaced))
                operation = .registration(op)
            } else if roll < 8 {
                let known = states[node].snapshot().devices.keys.sorted()
                let device = known[Int(random.next() % UInt64(known.count))]
                operation =
                    random.next() % 5 == 0
                    ? .forget(ForgetOp(device: states[node].canonical(of: device)!, vendor: states[node].vendor(of: device)!))
                    : .binding(
                        BindingChange(
                            kind: random.next() % 4 == 0 ? .unbind : .bind, vendor: states[node].vendor(of: device)!,
                            account: UUID128(high: 0xACC, low: random.next() % 3), device: device, time: now, origin: nodes[node]))
            } else {
                let candidate = candidates[Int(random.next() % UInt64(candidates.count))]
                var list = rules.rules.filter { $0.name != candidate.name }
                if let prefixes = candidate.prefixes { list.append(try! VendorRule(name: candidate.name, prefixes: prefixes)) }
                // A change whose rules overlap, or whose move would split a vendor, is refused.
                if let next = try? VendorRules(rules: list, defaultScope: .labels(2), aliases: history.aliases),
                    case .success(let move) = Result(catching: { () throws(IdentityError) -> VendorMove? in
                        try VendorMove.planned(destinations: states[node].destinations(from: rules, to: next, changing: candidate.name))
                    })
                {
                    if move != nil { moves += 1 }
                    operation = .vendorRule(
                        VendorRuleChange(
                            kind: candidate.prefixes == nil ? .remove : .set, name: candidate.name, rule: list.first { $0.name == candidate.name },
                            time: now, origin: nodes[node], move: move))
                }
            }
            guard let operation else { continue }
            if case .registration = operation {} else { states[node].apply(operation) }
            operations.append(operation)
            ConvergenceWorkloads.hearSomething(&states, of: operations, using: &random)
        }
    }
}

@Suite struct VendorMoveConvergenceTests {
    func registration(_ state: inout RegistryState, _ bundle: String, idfv: UUID128, rules: VendorRules, at millis: UInt64) -> RegistrationOp {
        let registration = try! Registration(bundle: bundle, identifiers: [PresentedIdentifier(rawKind: 2, text: idfv.text)], rules: rules)
        var random = SplitMix64(seed: millis)
        let now = HLCTimestamp(millis: millis, counter: 0)
        return state.register(registration, at: now, origin: NodeID(trusted: "node-a")) { generation in
            DeviceID.new(for: registration, at: now, generation: generation, key: MintingKey(secret: "k"), using: &random)
        }.operation
    }

    @Test func aMoveFilesDevicesClaimsAndBindingsUnderTheVendorTheyJoinAndMergesWhatMeets() throws {
        let (one, two, three) = (UUID128(high: 1, low: 1), UUID128(high: 2, low: 2), UUID128(high: 3, low: 3))
        let rules = try VendorRules()
        var state = RegistryState()
        // One phone's IDFV in two default vendors: two devices until the vendors are one.
        let a = registration(&state, "com.a.mail", idfv: one, rules: rules, at: 10)
        let b = registration(&state, "com.b.maps", idfv: one, rules: rules, at: 20)
        let c = registration(&state, "com.b.maps", idfv: two, rules: rules, at: 30)
        let account = UUID128(high: 0xACC, low: 1)
        for (op, millis) in [(a, UInt64(40)), (c, 50)] {
            state.apply(
                BindingChange(
                    kind: .bind, vendor: op.device.vendor, account: account, device: op.device.id, time: HLCTimestamp(millis: millis, counter: 0),
                    origin: NodeID(trusted: "node-a")))
        }
        // Registered on another node under com.a before it heard of the move; arrives after it.
        var other = RegistryState()
        let late = registration(&other, "com.a.mail", idfv: three, rules: rules, at: 60)
        #expect(state.deviceCount == 3 && state.claimCount == 3)

        let move = VendorRuleChange(
            kind: .set, name: "ab", rule: try VendorRule(name: "ab", prefixes: ["com.a", "com.b"]), time: HLCTimestamp(millis: 70, counter: 0),
            origin: NodeID(trusted: "node-b"), move: VendorMove(from: ["com.a", "com.b"], into: "ab"))
        state.apply(.vendorRule(move))
        state.apply(.registration(late))

        let ab = Vendor(trusted: "ab")
        let phone = state.lookup(vendor: ab, identifier: Identifier(kind: .idfv, value: one))
        // The earlier device wins the merge; every name of the vendor finds it.
        #expect(phone?.device.id == a.device.id && phone?.aliases == [b.device.id] && phone?.device.vendor == ab)
        #expect(state.lookup(vendor: Vendor(trusted: "com.b"), identifier: Identifier(kind: .idfv, value: one))?.device.id == a.device.id)
        #expect(state.lookup(vendor: Vendor(trusted: "com.a"), identifier: Identifier(kind: .idfv, value: three))?.device.vendor == ab)
        #expect(state.deviceCount == 3 && state.claimCount == 3)
        let snapshot = state.snapshot()
        #expect(snapshot.claims.keys.allSatisfy { $0.vendor == ab } && snapshot.devices.values.allSatisfy { $0.ref.vendor == ab })
        // The account's binds of the two old vendors are one account's now, whichever name asks.
        #expect(state.bindings(of: AccountKey(vendor: ab, account: account))?.changes.count == 2)
        #expect(state.bindings(of: AccountKey(vendor: Vendor(trusted: "com.a"), account: account))?.changes.count == 2)
        #expect(snapshot.bindings.allSatisfy { $0.vendor == ab })
        #expect(state.digest == state.recomputedDigest())

        // A snapshot of it restores to the same state.
        var restorer = RegistryState.Restorer()
        try state.forEachSnapshotRecord { try restorer.add($0) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == snapshot && restored.digest == state.digest)
    }

    /// Registers `identifiers` (kind, UUID) for `bundle` on node `origin`; the operation and the answer.
    func registration(
        _ state: inout RegistryState, _ bundle: String, _ identifiers: [(IdentifierKind, UUID128)], at millis: UInt64, on origin: String
    ) throws -> (operation: RegistrationOp, outcome: RegistrationOutcome) {
        let presented = identifiers.map { PresentedIdentifier(rawKind: $0.0.rawValue, text: $0.1.text) }
        let history = state.vendorRuleHistory
        let rules = try VendorRules(rules: history.rules, defaultScope: .labels(2), aliases: history.aliases)
        let registration = try Registration(bundle: bundle, identifiers: presented, rules: rules)
        var random = SplitMix64(seed: millis)
        let now = HLCTimestamp(millis: millis, counter: 0)
        return state.register(registration, at: now, origin: NodeID(trusted: origin)) { generation in
            DeviceID.new(for: registration, at: now, generation: generation, key: MintingKey(secret: "k"), using: &random)
        }
    }

    /// A node that has not heard of a move holds a merge set whose devices are filed under both
    /// of the vendors it joins (a merge that a node with the move made). A registration there
    /// that joins that set with a device of the old vendor answers the device replaced; every
    /// replica, in every order, must hold the two merged, as answered.
    @Test func aMergeAnsweredBeforeTheMoveArrivedHoldsOnEveryReplica() throws {
        let (one, two, five) = (UUID128(high: 1, low: 1), UUID128(high: 2, low: 2), UUID128(high: 5, low: 5))
        let (keychainTwo, keychainFive) = (UUID128(high: 0xC2, low: 2), UUID128(high: 0xC5, low: 5))
        var moved = RegistryState()
        var behind = RegistryState()
        // com.b's device first, so that it wins every merge below.
        let d2 = try registration(&moved, "com.b.maps", [(.idfv, two), (.keychain, keychainTwo)], at: 10, on: "node-m").operation
        let d1 = try registration(&moved, "com.a.mail", [(.idfv, one)], at: 20, on: "node-m").operation
        let move = VendorRuleChange(
            kind: .set, name: "ab", rule: try VendorRule(name: "ab", prefixes: ["com.a", "com.b"]), time: HLCTimestamp(millis: 30, counter: 0),
            origin: NodeID(trusted: "node-m"), move: VendorMove(from: ["com.a", "com.b"], into: "ab"))
        moved.apply(.vendorRule(move))
        // On the moved node: one registration presents com.a's IDFV with com.b's keychain UUID.
        let join = try registration(&moved, "com.a.mail", [(.idfv, one), (.keychain, keychainTwo)], at: 40, on: "node-m").operation
        #expect(join.device.id == d2.device.id && join.merged.map(\.id) == [d1.device.id])

        for op in [d2, d1, join] { behind.apply(.registration(op)) }
        let d5 = try registration(&behind, "com.a.mail", [(.idfv, five), (.keychain, keychainFive)], at: 50, on: "node-n").operation
        // Behind the move: com.a's IDFV leads to the set of com.b's device, the keychain UUID to d5.
        let (answered, outcome) = try registration(&behind, "com.a.mail", [(.idfv, one), (.keychain, keychainFive)], at: 60, on: "node-n")
        #expect(outcome.device == d2.device.id && outcome.replaced.contains(d5.device.id))
        #expect(behind.canonical(of: d5.device.id) == d2.device.id, "the node that answered does not hold its answer")

        let operations: [Operation] = [.registration(d2), .registration(d1), .vendorRule(move), .registration(join), .registration(d5), .registration(answered)]
        var reference: RegistryState?
        var random = SplitMix64(seed: 7)
        for round in 0..<24 {
            var replica = RegistryState()
            for operation in round == 0 ? operations : operations.shuffled(using: &random) { replica.apply(operation) }
            #expect(replica.canonical(of: d5.device.id) == d2.device.id, "round \(round): the answered merge was dropped")
            #expect(replica.digest == replica.recomputedDigest())
            if let reference {
                #expect(replica.snapshot() == reference.snapshot() && replica.digest == reference.digest, "round \(round)")
            } else {
                reference = replica
            }
        }
    }

    @Test func movesConvergeInEveryOrderToWhatTheOperationsNameUnderTheJoinedVendors() throws {
        var moves = 0
        var refiled = 0
        var mergedAcross = 0
        for seed in UInt64(1)...120 {
            let workload = VendorMoveWorkload(seed: seed)
            let operations = workload.operations
            moves += workload.moves
            let logged = operations.enumerated().map { index, operation in
                LoggedOperation(
                    origin: NodeID(trusted: "node-a"), epoch: 1, sequence: UInt64(index + 1), timestamp: HLCTimestamp(millis: 1, counter: 0),
                    operation: operation)
            }
            let changes = operations.compactMap { operation -> VendorRuleChange? in
                if case .vendorRule(let change) = operation { return change }
                return nil
            }
            let aliases = VendorRuleOracle.aliases(changes)
            let expected = ExpectedCanonical(logged, aliases: aliases)
            var reference = RegistryState()
            for operation in operations { reference.apply(operation) }
            let held = reference.snapshot()
            #expect(reference.vendorRuleHistory.aliases.canonical == aliases, "seed \(seed)")
            #expect(reference.digest == reference.recomputedDigest(), "seed \(seed)")
            #expect(held.canonical.mapKeys(\.uuid).mapValues(\.uuid) == expected.canonical, "seed \(seed): merges differ from the rule's")
            #expect(held.claims.count == expected.owner.count, "seed \(seed)")
            for (claim, owner) in held.claims {
                #expect(expected.owner[ExpectedCanonical.key(vendor: claim.vendor, identifier: claim.identifier)] == owner.uuid, "seed \(seed): \(claim)")
            }
            // A merge once answered holds: sets only ever join.
            for answer in workload.answers {
                for replaced in answer.replaced {
                    #expect(reference.canonical(of: replaced) == reference.canonical(of: answer.device), "seed \(seed): an answered merge was dropped")
                }
            }
            #expect(held.devices.values.allSatisfy { aliases[$0.ref.vendor.name] == nil }, "seed \(seed): a device filed under a moved name")
            #expect(held.bindings.allSatisfy { aliases[$0.vendor.name] == nil }, "seed \(seed): a binding filed under a moved name")
            // Devices whose operations named vendors that are one now, merged.
            var namedVendor = [UUID128: String]()
            for case .registration(let op) in operations where namedVendor[op.device.id.uuid] == nil {
                namedVendor[op.device.id.uuid] = op.device.vendor.name
                if aliases[op.device.vendor.name] != nil { refiled += 1 }
            }
            mergedAcross += expected.canonical.filter { id, root in namedVendor[id] != namedVendor[root] }.count
            var random = SplitMix64(seed: seed &* 77)
            for _ in 0..<3 {
                var shuffled = operations + operations.prefix(Int(random.next() % 20))
                shuffled.shuffle(using: &random)
                var replica = RegistryState()
                for operation in shuffled { replica.apply(operation) }
                #expect(replica.snapshot() == held, "seed \(seed): a delivery order changed the state")
                #expect(replica.digest == reference.digest, "seed \(seed): a delivery order changed the digest")
            }
        }
        #expect(moves > 50 && refiled > 50 && mergedAcross > 20, "moves \(moves), devices re-filed \(refiled), merged across vendors \(mergedAcross)")
    }
}

extension Dictionary {
    fileprivate func mapKeys<T: Hashable>(_ transform: (Key) -> T) -> [T: Value] {
        Dictionary<T, Value>(uniqueKeysWithValues: map { (transform($0.key), $0.value) })
    }
}
