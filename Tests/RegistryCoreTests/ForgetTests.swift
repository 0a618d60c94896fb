import Testing
@testable import RegistryCore

/// Forgetting a device (``ForgetOp``): what goes, what stays, how its identifiers are released
/// into a new claim generation, and that tombstones commute with every other operation.
@Suite struct ForgetTests {
    static let rules = try! VendorRules()
    static let vendor = Vendor(trusted: "com.v")
    static let key = MintingKey(secret: "forget tests")

    /// One replica that registers as a node does, minting IDs with ``key``.
    struct Node {
        var state = RegistryState()
        var clock = HybridLogicalClock()
        let id: NodeID
        var logged: [Operation] = []

        init(_ name: String) { id = NodeID(trusted: name) }

        mutating func register(_ bundle: String, _ identifiers: [(Int32, String)]) throws -> (op: RegistrationOp, outcome: RegistrationOutcome) {
            try register(bundle, identifiers, holdingBack: false)!
        }

        /// As a node decides: nil when the registration must wait for a forgotten device.
        mutating func register(
            _ bundle: String, _ identifiers: [(Int32, String)], holdingBack: Bool
        ) throws -> (op: RegistrationOp, outcome: RegistrationOutcome)? {
            let registration = try Registration(
                bundle: bundle, identifiers: identifiers.map { PresentedIdentifier(rawKind: $0.0, text: $0.1) }, rules: ForgetTests.rules)
            let now = clock.tick(wallMillis: 1_000)
            var random = SplitMix64(seed: now.rawValue)
            guard
                let result = state.register(registration, at: now, origin: id, holdingBack: holdingBack, mint: { generation in
                    DeviceID.new(for: registration, at: now, generation: generation, key: ForgetTests.key, using: &random)
                })
            else { return nil }
            logged.append(.registration(result.operation))
            return (result.operation, result.outcome)
        }

        mutating func forget(_ device: DeviceID) -> Operation {
            let op = Operation.forget(ForgetOp(device: state.canonical(of: device)!, vendor: state.vendor(of: device)!))
            state.apply(op)
            logged.append(op)
            return op
        }
    }

    static let idfv1 = "11111111-1111-4111-8111-111111111111"
    static let idfv2 = "33333333-3333-4333-8333-333333333333"
    static let keychain1 = "22222222-2222-4222-8222-222222222222"
    /// `idfv1`'s generation-1 claim value as docs/identity.md defines it (SipHash-128 under the
    /// fixed key of docs/identity.md, of its 16 bytes and 1 as 4 bytes little-endian), computed
    /// apart with the SipHash of `Tests/Interop/interop.py`.
    static let generationOneOfIDFV1 = "48278c40-53cc-a5f8-ba5f-cbeaf7e1a45e"

    /// ``RegistryState/erasures`` counts forgets and every operation after them that names a
    /// gone device, which the state drops but the journal holds: a bind made where the forget had
    /// not arrived, a registration that lands on the device, a second forget. Nothing else moves it.
    @Test func operationsNamingAGoneDeviceCountAsErasures() throws {
        var node = Node("node-a")
        let device = try node.register("com.v.a", [(2, Self.idfv1)]).outcome.device
        let other = try node.register("com.v.a", [(2, Self.idfv2)]).outcome.device
        #expect(node.state.erasures == 0)
        _ = node.forget(device)
        #expect(node.state.erasures == 1)
        // A bind of another device, and another device's registration, are no erasures.
        node.state.apply(BindingChange(kind: .bind, vendor: Self.vendor, account: UUID128(high: 9, low: 9), device: other, time: node.clock.tick(wallMillis: 1_000), origin: node.id))
        _ = try node.register("com.v.b", [(2, Self.idfv2)])
        #expect(node.state.erasures == 1)
        // A late bind of the gone device, from a node that had not heard of the forget.
        node.state.apply(BindingChange(kind: .bind, vendor: Self.vendor, account: UUID128(high: 1, low: 2), device: device, time: node.clock.tick(wallMillis: 1_000), origin: NodeID(trusted: "node-b")))
        #expect(node.state.erasures == 2)
        // A second forget of it.
        node.state.apply(.forget(ForgetOp(device: device, vendor: Self.vendor)))
        #expect(node.state.erasures == 3)
    }

    @Test func aForgottenDeviceAndItsAliasesAreGoneWithTheirAppsAndBindings() throws {
        var node = Node("node-a")
        let first = try node.register("com.v.a", [(2, Self.idfv1)]).outcome.device
        let second = try node.register("com.v.b", [(1, Self.keychain1)]).outcome.device
        let merged = try node.register("com.v.a", [(1, Self.keychain1), (2, Self.idfv1)]).outcome.device
        #expect(first != second && [first, second].contains(merged))
        let account = UUID128(high: 0xACC, low: 1)
        let bind = BindingChange(kind: .bind, vendor: Self.vendor, account: account, device: second, time: node.clock.tick(wallMillis: 1_000), origin: node.id)
        node.state.apply(bind)
        #expect(node.state.bindingChangeCount == 1)

        _ = node.forget(first)
        for device in [first, second] {
            #expect(node.state.isGone(device))
            #expect(node.state.resolve(device)?.apps == [], "a gone set keeps no apps")
        }
        #expect(node.state.bindingChangeCount == 0 && node.state.bindings(of: AccountKey(vendor: Self.vendor, account: account)) == nil)
        for text in [Self.idfv1, Self.keychain1] {
            let identifier = try Identifier(rawKind: text == Self.idfv1 ? 2 : 1, text: text)
            #expect(node.state.lookup(vendor: Self.vendor, identifier: identifier) == nil, "its identifiers are released")
        }
        // The devices and the released claims stay, so that a late operation cannot bring them back.
        #expect(node.state.snapshot().devices.count == 2 && node.state.claimCount == 2)
        #expect(node.state.digest == node.state.recomputedDigest())
        // A late sighting of the gone set, and a late bind of one of its devices, change nothing.
        let digest = node.state.digest
        node.state.apply(BindingChange(kind: .bind, vendor: Self.vendor, account: account, device: first, time: node.clock.tick(wallMillis: 1_000), origin: node.id))
        #expect(node.state.digest == digest && node.state.bindingChangeCount == 0)
    }

    @Test func reRegisteringAForgottenDevicesIdentifiersMakesANewDeviceUnderANewID() throws {
        var node = Node("node-a")
        let forgotten = try node.register("com.v.a", [(2, Self.idfv1)]).outcome.device
        #expect(forgotten == DeviceID.minted(vendor: Self.vendor, idfv: try UUID128(text: Self.idfv1).unwrap(), key: Self.key))
        _ = node.forget(forgotten)
        let idfv = try Identifier(rawKind: 2, text: Self.idfv1)
        for generation in UInt32(1)...3 {
            let (op, outcome) = try node.register("com.v.b", [(2, Self.idfv1)])
            #expect(outcome.created && outcome.replaced.isEmpty)
            #expect(outcome.device == DeviceID.minted(vendor: Self.vendor, idfv: idfv.value, generation: generation, key: Self.key))
            #expect(op.claims == [idfv.atGeneration(generation)], "the claim of the next generation, which every replica applies as it is")
            #expect(node.state.lookup(vendor: Self.vendor, identifier: idfv)?.device.id == outcome.device)
            // Sibling apps find it like any device.
            #expect(try node.register("com.v.c", [(2, Self.idfv1)]).outcome.device == outcome.device)
            _ = node.forget(outcome.device)
        }
        #expect(node.state.tombstoneCount == 4 && node.state.digest == node.state.recomputedDigest())
    }

    /// Two nodes register the same IDFV once both heard of the forget: they mint the same ID, as
    /// for any first install, and a third replica that heard of neither forget nor first device
    /// keeps them apart from it.
    @Test func twoNodesReRegisteringAtOnceMintOneIDAndStayApartFromTheForgottenDevice() throws {
        var a = Node("node-a")
        var b = Node("node-b")
        let forgotten = try a.register("com.v.a", [(2, Self.idfv1)])
        b.state.apply(forgotten.op)
        let tombstone = a.forget(forgotten.outcome.device)
        b.state.apply(tombstone)
        let onA = try a.register("com.v.a", [(2, Self.idfv1)])
        let onB = try b.register("com.v.b", [(2, Self.idfv1), (1, Self.keychain1)])
        #expect(onA.outcome.device == onB.outcome.device && onA.outcome.device != forgotten.outcome.device)
        var c = RegistryState()
        for op in [Operation.registration(onB.op), .registration(onA.op), .registration(forgotten.op)] { c.apply(op) }
        #expect(c.canonical(of: onA.outcome.device) == onA.outcome.device && c.canonical(of: forgotten.outcome.device) == forgotten.outcome.device)
        c.apply(tombstone)
        #expect(c.isGone(forgotten.outcome.device) && !c.isGone(onA.outcome.device))
        var all = a.state
        for op in b.logged { all.apply(op) }
        #expect(all.snapshot() == c.snapshot() && all.digest == c.digest)
    }

    /// A registration accepted by a node that had not heard of the forget lands on the forgotten
    /// device, and goes with it everywhere, whatever the order.
    @Test func aRegistrationThatRacedTheForgetIsGoneWithIt() throws {
        var a = Node("node-a")
        var b = Node("node-b")
        let forgotten = try a.register("com.v.a", [(2, Self.idfv1)])
        b.state.apply(forgotten.op)
        let tombstone = a.forget(forgotten.outcome.device)
        // B has not heard: the app's registration, with a new keychain UUID, joins the device.
        let raced = try b.register("com.v.b", [(2, Self.idfv1), (1, Self.keychain1)])
        #expect(raced.outcome.device == forgotten.outcome.device)
        for order in [[Operation.registration(forgotten.op), tombstone, .registration(raced.op)],
                      [.registration(raced.op), tombstone, .registration(forgotten.op)],
                      [tombstone, .registration(raced.op), .registration(forgotten.op)]] {
            var replica = RegistryState()
            for op in order { replica.apply(op) }
            #expect(replica.isGone(forgotten.outcome.device))
            #expect(replica.lookup(vendor: Self.vendor, identifier: try Identifier(rawKind: 1, text: Self.keychain1)) == nil)
            #expect(replica.digest == replica.recomputedDigest())
        }
    }

    /// A node that holds the forget but not yet the forgotten device's registration (they came
    /// from two logs) mints past the forgotten ID, and claims the identifier in that generation
    /// too: on every replica the new device stays apart from the forgotten one.
    @Test func aNodeHoldingOnlyTheTombstoneClaimsTheGenerationItMintsIn() throws {
        var a = Node("node-a")
        let forgotten = try a.register("com.v.a", [(2, Self.idfv1)])
        let tombstone = a.forget(forgotten.outcome.device)
        var c = Node("node-c")
        c.state.apply(tombstone)
        let fresh = try c.register("com.v.b", [(2, Self.idfv1)])
        let idfv = try Identifier(rawKind: 2, text: Self.idfv1)
        #expect(fresh.outcome.created && fresh.outcome.device != forgotten.outcome.device)
        #expect(fresh.outcome.device == DeviceID.minted(vendor: Self.vendor, idfv: idfv.value, generation: 1, key: Self.key))
        #expect(fresh.op.claims == [idfv.atGeneration(1)])
        for order in [[Operation.registration(forgotten.op), tombstone, .registration(fresh.op)], [.registration(fresh.op), .registration(forgotten.op), tombstone]] {
            var replica = RegistryState()
            for op in order { replica.apply(op) }
            #expect(!replica.isGone(fresh.outcome.device) && replica.isGone(forgotten.outcome.device))
            #expect(replica.lookup(vendor: Self.vendor, identifier: idfv)?.device.id == fresh.outcome.device)
        }
        c.state.apply(.registration(forgotten.op))
        #expect(!c.state.isGone(fresh.outcome.device) && c.state.lookup(vendor: Self.vendor, identifier: idfv)?.device.id == fresh.outcome.device)
    }

    /// The forgotten device claimed a keychain UUID beside its IDFV. A node holding the forget
    /// and not the registration knows neither claim: a new device it creates for the same phone
    /// claims the keychain UUID in generation 0, where the forgotten device's claim meets it once
    /// that arrives, and is buried with it on every replica. So the node holds new devices of
    /// that vendor back until the forgotten device arrives, and then decides past its claims.
    @Test func aNodeHoldingOnlyTheTombstoneHoldsNewDevicesOfItsVendorBackUntilTheForgottenDeviceArrives() throws {
        var a = Node("node-a")
        let forgotten = try a.register("com.v.a", [(1, Self.keychain1), (2, Self.idfv1)])
        let tombstone = a.forget(forgotten.outcome.device)
        let phone: [(Int32, String)] = [(1, Self.keychain1), (2, Self.idfv1)]

        // Deciding anyway (what a node did before) buries a device nobody forgot.
        var early = Node("node-c")
        early.state.apply(tombstone)
        let buried = try early.register("com.v.b", phone)
        early.state.apply(.registration(forgotten.op))
        #expect(early.state.isGone(buried.outcome.device), "the gap this rule closes: a live device buried")

        var c = Node("node-c")
        c.state.apply(tombstone)
        #expect(c.state.forgottenDeviceAwaited(in: Self.vendor) == forgotten.outcome.device)
        let digest = c.state.digest
        #expect(try c.register("com.v.b", phone, holdingBack: true) == nil)
        #expect(c.state.digest == digest && c.logged.isEmpty, "held back, nothing changed")
        // Another vendor's devices do not wait.
        #expect(try c.register("com.w.b", phone, holdingBack: true)?.outcome.created == true)
        // A device this node knows, presenting an identifier new here, waits too: the claim could
        // be the forgotten device's (a keychain cloned onto a second phone), and would join the
        // two and bury it. Presenting only what it claimed already, it is served.
        var d = Node("node-d")
        let other = try d.register("com.v.b", [(2, Self.idfv2)])
        d.state.apply(tombstone)
        #expect(try d.register("com.v.b", [(1, Self.keychain1), (2, Self.idfv2)], holdingBack: true) == nil)
        #expect(try d.register("com.v.c", [(2, Self.idfv2)], holdingBack: true)?.outcome.device == other.outcome.device)
        d.state.apply(.registration(forgotten.op))
        let joined = try #require(try d.register("com.v.b", [(1, Self.keychain1), (2, Self.idfv2)], holdingBack: true))
        #expect(joined.outcome.device == other.outcome.device && !d.state.isGone(other.outcome.device))

        c.state.apply(.registration(forgotten.op))
        #expect(c.state.forgottenDeviceAwaited(in: Self.vendor) == nil)
        let fresh = try #require(try c.register("com.v.b", phone, holdingBack: true))
        #expect(fresh.outcome.created && fresh.outcome.device != forgotten.outcome.device)
        let all: [Operation] = [.registration(forgotten.op), tombstone, .registration(fresh.op)]
        for order in [all, [all[2], all[0], all[1]], [all[1], all[2], all[0]]] {
            var replica = RegistryState()
            for op in order { replica.apply(op) }
            #expect(!replica.isGone(fresh.outcome.device) && replica.isGone(forgotten.outcome.device))
            for (kind, text) in phone {
                #expect(replica.lookup(vendor: Self.vendor, identifier: try Identifier(rawKind: kind, text: text))?.device.id == fresh.outcome.device)
            }
        }
    }

    /// A snapshot keeps no forget's vendor: restored, a tombstone whose device it lacks holds
    /// back every vendor's new devices, until the device arrives.
    @Test func aRestoredTombstoneWithoutItsDeviceHoldsBackEveryVendor() throws {
        var a = Node("node-a")
        let forgotten = try a.register("com.v.a", [(2, Self.idfv1)])
        let tombstone = a.forget(forgotten.outcome.device)
        var c = Node("node-c")
        c.state.apply(tombstone)
        var restorer = RegistryState.Restorer(expectedDevices: 0)
        try c.state.forEachSnapshotRecord { try restorer.add($0) }
        c.state = try restorer.finish()
        #expect(c.state.forgottenDeviceAwaited(in: Vendor(trusted: "com.w")) == forgotten.outcome.device)
        #expect(try c.register("com.w.b", [(2, Self.idfv2)], holdingBack: true) == nil)
        c.state.apply(.registration(forgotten.op))
        #expect(try c.register("com.w.b", [(2, Self.idfv2)], holdingBack: true)?.outcome.created == true)
    }

    @Test func aForgetThatArrivesBeforeItsDeviceBuriesTheDeviceOnArrival() throws {
        var a = Node("node-a")
        let device = try a.register("com.v.a", [(2, Self.idfv1)])
        let bind = BindingChange(kind: .bind, vendor: Self.vendor, account: UUID128(high: 1, low: 2), device: device.outcome.device, time: a.clock.tick(wallMillis: 1_000), origin: a.id)
        var replica = RegistryState()
        replica.apply(.binding(bind))
        replica.apply(.forget(ForgetOp(device: device.outcome.device, vendor: Self.vendor)))
        #expect(replica.isGone(device.outcome.device) && replica.bindingChangeCount == 0)
        replica.apply(.registration(device.op))
        #expect(replica.isGone(device.outcome.device) && replica.resolve(device.outcome.device)?.apps == [])
        #expect(replica.digest == replica.recomputedDigest())
    }

    @Test(arguments: Array(1...30) as [UInt64])
    func tombstonesSurviveASnapshotAndAreRefusedTwice(seed: UInt64) throws {
        let operations = ForgetConvergenceWorkload(seed: seed).operations
        var state = RegistryState()
        for operation in operations { state.apply(operation) }
        // A tombstone of a device the replica never heard of is kept too.
        state.apply(ForgetOp(device: DeviceID(UUID128(high: 0xF0, low: seed)), vendor: Self.vendor))
        var records = [SnapshotRecord]()
        state.forEachSnapshotRecord { records.append($0) }
        var restorer = RegistryState.Restorer()
        for record in records { try restorer.add(record) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == state.snapshot(), "seed \(seed)")
        #expect(restored.digest == state.digest && restored.digest == restored.recomputedDigest())
        let last = try #require(records.lastIndex { if case .tombstone = $0 { true } else { false } })
        guard case .tombstone(let device) = records[last] else { return }
        var doubled = records
        doubled.insert(records[last], at: last + 1)
        var twice = RegistryState.Restorer()
        #expect(throws: SnapshotRestoreError("tombstone \(device) appears twice")) {
            for record in doubled { try twice.add(record) }
        }
    }

    @Test func claimGenerationsAreDistinctStableValuesOfTheSameKind() throws {
        let idfv = try Identifier(rawKind: 2, text: Self.idfv1)
        #expect(idfv.atGeneration(0) == idfv)
        let values = Set((0..<64).map { idfv.atGeneration(UInt32($0)).value })
        #expect(values.count == 64)
        #expect(idfv.atGeneration(5).kind == .idfv)
        // The derivation is fixed: a value every node computes alike, pinned here.
        #expect(idfv.atGeneration(1).value.text == Self.generationOneOfIDFV1)
        let keychain = Identifier(kind: .keychain, value: idfv.value)
        #expect(keychain.atGeneration(1).value == idfv.atGeneration(1).value && keychain.atGeneration(1).kind == .keychain)
    }
}

extension Optional {
    fileprivate func unwrap() throws -> Wrapped {
        guard let self else { throw ForgetTestError.missing }
        return self
    }
}

private enum ForgetTestError: Error { case missing }
