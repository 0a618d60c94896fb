import Testing
@testable import RegistryCore

/// Binding changes held in a ``RegistryState``: a join like every other operation (any order, any
/// repeats, the same state and digest), kept in snapshots, and found from any device of a merge.
@Suite struct BindingStateTests {
    /// Registrations from ``MergeConvergenceTests`` mixed with binding changes of a few accounts,
    /// naming devices those registrations made and a device no registration made.
    func operations(seed: UInt64) throws -> [Operation] {
        var random = SplitMix64(seed: seed)
        let registrations = try MergeConvergenceTests().registeredOperations(seed: seed)
        var devices = registrations.map(\.device)
        devices.append(DeviceRef(id: DeviceID(UUID128(high: 0xDEAD, low: seed)), created: .zero, origin: NodeID(trusted: "node-z"), vendor: Vendor(trusted: "com.v")))
        let accounts = (0..<4).map { UUID128(high: 0xACC, low: $0) }
        let origins = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        var operations = registrations.map { Operation.registration($0) }
        for step in 0..<60 {
            let device = devices[Int(random.next() % UInt64(devices.count))]
            let change = BindingChange(
                kind: random.next() % 4 == 0 ? .unbind : .bind, vendor: device.vendor, account: accounts[Int(random.next() % 4)],
                device: device.id, time: HLCTimestamp(millis: 2_000 + UInt64(step / 3), counter: UInt16(random.next() % 2)),
                origin: origins[Int(random.next() % 3)])
            operations.insert(.binding(change), at: Int(random.next() % UInt64(operations.count + 1)))
        }
        return operations
    }

    @Test(arguments: Array(1...40) as [UInt64])
    func bindingChangesConvergeInAnyOrderWithRepeats(seed: UInt64) throws {
        let operations = try operations(seed: seed)
        var reference = RegistryState()
        for operation in operations { reference.apply(operation) }
        var random = SplitMix64(seed: seed ^ 0xB1D)
        for _ in 0..<3 {
            var shuffled = operations + operations.prefix(Int(random.next() % 20))
            shuffled.shuffle(using: &random)
            var state = RegistryState()
            for operation in shuffled { state.apply(operation) }
            #expect(state.snapshot() == reference.snapshot(), "seed \(seed)")
            #expect(state.digest == reference.digest && state.digest == state.recomputedDigest(), "seed \(seed)")
            #expect(state.bindingChangeCount == reference.bindingChangeCount)
        }
        let changes = Set(operations.compactMap { operation -> BindingChange? in
            if case .binding(let change) = operation { return change }
            return nil
        })
        #expect(reference.snapshot().bindings == changes)
        #expect(reference.bindingChangeCount == changes.count)
    }

    @Test(arguments: Array(1...20) as [UInt64])
    func bindingsSurviveASnapshot(seed: UInt64) throws {
        var state = RegistryState()
        for operation in try operations(seed: seed) { state.apply(operation) }
        var restorer = RegistryState.Restorer()
        try state.forEachSnapshotRecord { try restorer.add($0) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == state.snapshot(), "seed \(seed)")
        #expect(restored.digest == state.digest && restored.digest == restored.recomputedDigest())
        #expect(restored.bindingChangeCount == state.bindingChangeCount)
    }

    @Test func aDevicesAccountsIncludeThoseOfDevicesMergedWithIt() throws {
        let rules = try VendorRules()
        var state = RegistryState()
        let node = NodeID(trusted: "node-a")
        var clock = HybridLogicalClock()
        var random = SplitMix64(seed: 3)
        func register(_ identifiers: [PresentedIdentifier]) throws -> DeviceID {
            let registration = try Registration(bundle: "com.v.app", identifiers: identifiers, rules: rules)
            let now = clock.tick(wallMillis: 1_000)
            return state.register(registration, at: now, origin: node) { _ in DeviceID.mint(at: now, using: &random) }.outcome.device
        }
        let idfv = PresentedIdentifier(rawKind: 2, text: "11111111-1111-4111-8111-111111111111")
        let keychain = PresentedIdentifier(rawKind: 1, text: "22222222-2222-4222-8222-222222222222")
        let first = try register([idfv])
        let second = try register([keychain])
        let account = AccountKey(vendor: Vendor(trusted: "com.v"), account: UUID128(high: 1, low: 1))
        state.apply(
            BindingChange(kind: .bind, vendor: account.vendor, account: account.account, device: second, time: clock.tick(wallMillis: 1_000), origin: node))
        #expect(state.accounts(of: second) == [account])
        #expect(state.accounts(of: first).isEmpty)
        // One registration presents both: the two devices merge, and either finds the account.
        _ = try register([idfv, keychain])
        #expect(state.canonical(of: first) == state.canonical(of: second))
        #expect(state.accounts(of: first) == [account])
        #expect(state.accounts(of: second) == [account])
        #expect(state.accounts(of: DeviceID(UUID128(high: 9, low: 9))).isEmpty)
        let policy = BindingPolicy.default
        let bound = state.bindings(of: account)!.resolve(policy: policy, canonical: { state.canonical(of: $0) }).bound
        #expect(bound.map(\.device) == [state.canonical(of: second)!])
    }

    @Test func aRestoreRefusesARepeatedOrDanglingBinding() throws {
        var state = RegistryState()
        let change = BindingChange(
            kind: .bind, vendor: Vendor(trusted: "com.v"), account: UUID128(high: 1, low: 2), device: DeviceID(UUID128(high: 3, low: 4)),
            time: HLCTimestamp(millis: 5, counter: 0), origin: NodeID(trusted: "node-a"))
        state.apply(change)
        var records = [SnapshotRecord]()
        state.forEachSnapshotRecord { records.append($0) }
        let binding = records.last!
        var repeated = RegistryState.Restorer()
        for record in records { try repeated.add(record) }
        #expect(throws: SnapshotRestoreError("binding change \(change) appears twice")) { try repeated.add(binding) }
        // The names are those the binding interned: vendor 0 and origin 0.
        for (vendor, origin) in [(UInt32(1), UInt32(0)), (0, 1)] {
            var dangling = RegistryState.Restorer()
            for record in records.dropLast() { try dangling.add(record) }
            #expect(throws: SnapshotRestoreError("a binding names a vendor or origin the snapshot does not")) {
                try dangling.add(.binding(kind: .bind, vendor: vendor, account: change.account, device: change.device, time: change.time, origin: origin))
            }
        }
    }

    /// A vendor and an origin that only a binding names (no device of theirs is held) are kept by
    /// the snapshot, and a restored state finds a device's accounts as the original did.
    @Test func aRestoredStateKeepsNamesOnlyABindingUsesAndFindsADevicesAccounts() throws {
        var state = RegistryState()
        for op in try MergeConvergenceTests().registeredOperations(seed: 5) { state.apply(op) }
        let device = try #require(state.snapshot().records.keys.first)
        let vendor = try #require(state.vendor(of: device))
        let onlyHere = BindingChange(
            kind: .bind, vendor: Vendor(trusted: "org.elsewhere"), account: UUID128(high: 9, low: 9), device: DeviceID(UUID128(high: 8, low: 8)),
            time: HLCTimestamp(millis: 4_000, counter: 0), origin: NodeID(trusted: "node-far"))
        let ofDevice = BindingChange(
            kind: .bind, vendor: vendor, account: UUID128(high: 7, low: 7), device: device, time: HLCTimestamp(millis: 4_001, counter: 0),
            origin: NodeID(trusted: "node-a"))
        state.apply(onlyHere)
        state.apply(ofDevice)
        var restorer = RegistryState.Restorer()
        try state.forEachSnapshotRecord { try restorer.add($0) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == state.snapshot())
        #expect(restored.digest == state.digest && restored.digest == restored.recomputedDigest())
        #expect(restored.accounts(of: device) == [AccountKey(vendor: vendor, account: ofDevice.account)])
        #expect(restored.bindings(of: AccountKey(vendor: onlyHere.vendor, account: onlyHere.account))?.changes == [onlyHere])
    }
}
