import Testing
@testable import RegistryCore

/// Keychains cloned onto a second phone (``CloneOp``): what shows a clone and what does not,
/// what flag and split do to later registrations, and that clone operations commute with every
/// other operation.
@Suite struct CloneTests {
    static let key = MintingKey(secret: "clone tests")
    static let day: UInt64 = 86_400_000
    static let start: UInt64 = 1_800_000_000_000

    /// One replica that registers as a node does: each registration is followed by the clone
    /// operation it shows, if any, under `policy`.
    struct Node {
        var state = RegistryState()
        var clock = HybridLogicalClock()
        let id: NodeID
        var policy: ClonePolicy
        var logged: [Operation] = []
        var clones: [CloneOp] = []

        init(_ name: String, policy: ClonePolicy = .default) {
            id = NodeID(trusted: name)
            self.policy = policy
        }

        @discardableResult
        mutating func register(
            _ bundle: String, keychain: String? = nil, idfv: String? = nil, onDay day: UInt64
        ) throws -> RegistrationOutcome {
            let rules = try VendorRules()
            let registration = try Registration(bundle: bundle, identifiers: RegisterPresented.of(keychain: keychain, idfv: idfv), rules: rules)
            let now = clock.tick(wallMillis: CloneTests.start + day * CloneTests.day)
            var random = SplitMix64(seed: now.rawValue)
            let (op, outcome) = state.register(registration, at: now, origin: id) { generation in
                DeviceID.new(for: registration, at: now, generation: generation, key: CloneTests.key, using: &random)
            }
            logged.append(.registration(op))
            let time = clock.tick(wallMillis: now.millis)
            if let clone = state.suspectedClone(of: registration, decided: op, policy: policy, at: time, origin: id, key: CloneTests.key) {
                state.apply(clone)
                logged.append(.clone(clone))
                clones.append(clone)
            }
            return outcome
        }
    }

    static let keychain = "22222222-2222-4222-8222-222222222222"
    static let idfvA = "11111111-1111-4111-8111-111111111111"
    static let idfvB = "33333333-3333-4333-8333-333333333333"
    static let idfvC = "44444444-4444-4444-8444-444444444444"

    @Test func anIDFVResetIsNoClone() throws {
        var node = Node("node-a")
        let device = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0).device
        // Every app removed: a new IDFV with the same keychain UUID, and the old one never again.
        #expect(try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1).device == device)
        try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvB, onDay: 2)
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 3)
        #expect(node.clones.isEmpty)
        #expect(node.state.suspectedClones().isEmpty)
    }

    @Test func theEarlierIDFVInUseAgainWithinTheWindowIsFlaggedOnce() throws {
        var node = Node("node-a")
        let device = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0).device
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 10)
        #expect(node.clones.isEmpty, "the later IDFV alone shows nothing yet")
        // The old phone registers again: both phones are in use.
        #expect(try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvA, onDay: 12).device == device)
        #expect(node.clones.count == 1)
        let clone = try #require(node.clones.first)
        #expect(clone.action == .flag && clone.device.id == device && clone.bundle.value == "com.v.b")
        #expect(clone.appeared.millis == Self.start + 10 * Self.day && clone.earlierSeen.millis == Self.start + 12 * Self.day)
        // Marked once; both phones keep the one device.
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 13)
        #expect(try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 13).device == device)
        #expect(node.clones.count == 1)
        let listed = node.state.suspectedClones()
        #expect(listed.count == 1 && listed.first?.device == device && listed.first?.splitDevice == nil)
        #expect(node.state.suspectedClones(in: Vendor(trusted: "com.other")).isEmpty)
    }

    @Test func theEarlierIDFVPastTheWindowOrWithoutTheKeychainShowsNothing() throws {
        var late = Node("node-a", policy: try ClonePolicy(action: .flag, windowDays: 3))
        try late.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0)
        try late.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 10)
        try late.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 14)
        #expect(late.clones.isEmpty, "4 days after, past a 3-day window")

        var noKeychain = Node("node-a")
        try noKeychain.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0)
        try noKeychain.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        try noKeychain.register("com.v.a", idfv: Self.idfvA, onDay: 2)
        try noKeychain.register("com.v.a", keychain: Self.keychain, onDay: 2)
        #expect(noKeychain.clones.isEmpty, "the signal is one keychain UUID presented with both IDFVs")

        var off = Node("node-a", policy: try ClonePolicy(action: .off))
        try off.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0)
        try off.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        try off.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2)
        #expect(off.clones.isEmpty)
    }

    @Test func aSplitGivesTheLaterIDFVADeviceOfItsOwnAndTheKeychainLinksNothingMore() throws {
        var node = Node("node-a", policy: try ClonePolicy(action: .split))
        let device = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0).device
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        #expect(try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2).device == device)
        let split = try #require(node.clones.first)
        let newDevice = try #require(split.newDevice?.id)
        #expect(split.action == .split && newDevice != device)

        // The new phone now gets its own device, and learns that the old one is not its own.
        let newPhone = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 3)
        #expect(newPhone.device == newDevice && !newPhone.created && newPhone.replaced == [device])
        #expect(try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvB, onDay: 3).device == newDevice)
        // The old phone keeps its device; the keychain alone still names it.
        #expect(try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvA, onDay: 3).device == device)
        #expect(try node.register("com.v.b", keychain: Self.keychain, onDay: 3).device == device)
        // The new phone's keychain wiped: its new keychain UUID leads nowhere else either.
        let wiped = try node.register("com.v.a", keychain: "77777777-7777-4777-8777-777777777777", idfv: Self.idfvB, onDay: 3)
        #expect(wiped.device == newDevice && wiped.replaced == [device])
        #expect(try node.register("com.v.a", keychain: "77777777-7777-4777-8777-777777777777", idfv: Self.idfvA, onDay: 3).device == device)
        // A third IDFV with the contested keychain is a device of its own.
        let third = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvC, onDay: 4)
        #expect(third.created && third.device != device && third.device != newDevice)
        #expect(node.clones.count == 1)
        let listed = try #require(node.state.suspectedClones().first)
        #expect(listed.device == device && listed.splitDevice == newDevice)
        // A lookup of the later IDFV finds the new device.
        let sealed = try Identifier(PresentedIdentifier(rawKind: 2, text: Self.idfvB))
        #expect(node.state.lookup(vendor: Vendor(trusted: "com.v"), identifier: sealed)?.device.id == newDevice)
    }

    @Test func twoNodesSplittingOneDeviceAtOnceNameOneNewDevice() throws {
        var a = Node("node-a", policy: try ClonePolicy(action: .split))
        try a.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0)
        try a.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        var b = Node("node-b", policy: try ClonePolicy(action: .split))
        for op in a.logged { b.state.apply(op) }
        b.clock = a.clock
        try a.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2)
        try b.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2)
        let (splitA, splitB) = (try #require(a.clones.first), try #require(b.clones.first))
        #expect(splitA != splitB && splitA.newDevice?.id == splitB.newDevice?.id)
        #expect(splitA.decidedBy == a.id && splitB.decidedBy == b.id)
        for op in b.logged { a.state.apply(op) }
        for op in a.logged { b.state.apply(op) }
        #expect(a.state.digest == b.state.digest && a.state.snapshot() == b.state.snapshot())
        #expect(a.state.suspectedClones().count == 1)
    }

    /// A flag is heard as `clone_suspected` on the device, a split as `split` naming the new device
    /// (after its `created`), on the node that decides it and on a replica that applies it.
    @Test(arguments: [ClonePolicy.Action.flag, .split])
    func watchersHearTheMarkAndTheSplit(action: ClonePolicy.Action) throws {
        var node = Node("node-a", policy: try ClonePolicy(action: action))
        node.state.recordEvents(configuredRules: [])
        let device = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0).device
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        _ = node.state.takeEvents()
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2)
        let clone = try #require(node.clones.first)
        let vendor = Vendor(trusted: "com.v")
        let expected: [FeedEvent] =
            action == .flag
            ? [.cloneSuspected(device: device, vendor: vendor)]
            : [.created(device: clone.newDevice!.id, vendor: vendor), .split(device: device, newDevice: clone.newDevice!.id, vendor: vendor)]
        #expect(node.state.takeEvents() == expected)
        var replica = RegistryState()
        for op in node.logged.dropLast() { replica.apply(op) }
        replica.recordEvents(configuredRules: [])
        replica.apply(.clone(clone))
        #expect(replica.takeEvents() == expected)
        // Held already: nothing more.
        replica.apply(.clone(clone))
        #expect(replica.takeEvents().isEmpty)
    }

    /// Every order of a history with flags, splits, registrations on both phones, a third phone,
    /// another keychain and a forget of the third phone gives one state (the digest, the whole
    /// state, the listing and the lookups), and a snapshot of it restores to the same state.
    @Test(arguments: [ClonePolicy.Action.flag, .split])
    func cloneOperationsCommuteAndSurviveASnapshot(action: ClonePolicy.Action) throws {
        var node = Node("node-a", policy: try ClonePolicy(action: action))
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0)
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 1)
        try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvA, onDay: 2)
        try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvB, onDay: 3)
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvC, onDay: 4)
        try node.register("com.v.a", keychain: "55555555-5555-4555-8555-555555555555", idfv: Self.idfvA, onDay: 5)
        try node.register("com.v.a", idfv: "66666666-6666-4666-8666-666666666666", onDay: 5)
        let third = try #require(node.state.lookup(vendor: Vendor(trusted: "com.v"), identifier: try Self.sealed(Self.idfvC))?.device.id)
        let forget = Operation.forget(ForgetOp(device: node.state.canonical(of: third)!, vendor: Vendor(trusted: "com.v")))
        node.state.apply(forget)
        node.logged.append(forget)
        // Flagged, the keychain took IDFV C too, and A in use after it is a second mark; split,
        // the contested keychain gave C a device of its own.
        #expect(node.clones.count == (action == .flag ? 2 : 1))
        let expected = node.state.snapshot()
        var random = SplitMix64(seed: 41)
        for _ in 0..<50 {
            var replica = RegistryState()
            for op in node.logged.shuffled(using: &random) { replica.apply(op) }
            for op in node.logged.shuffled(using: &random).prefix(4) { replica.apply(op) }
            #expect(replica.digest == node.state.digest)
            #expect(replica.snapshot() == expected)
            #expect(replica.suspectedClones() == node.state.suspectedClones())
            for idfv in [Self.idfvA, Self.idfvB, Self.idfvC] {
                let sealed = try Self.sealed(idfv)
                #expect(replica.lookup(vendor: Vendor(trusted: "com.v"), identifier: sealed) == node.state.lookup(vendor: Vendor(trusted: "com.v"), identifier: sealed))
            }
        }
        var restorer = RegistryState.Restorer()
        try node.state.forEachSnapshotRecord { try restorer.add($0) }
        let restored = try restorer.finish()
        #expect(restored.snapshot() == expected && restored.digest == node.state.digest)
        #expect(restored.suspectedClones() == node.state.suspectedClones())
    }

    /// A forgotten device keeps no clone evidence: its later IDFVs and its marks go from the
    /// state and its snapshots, as its app sightings do (docs/security.md), whichever order the
    /// forget and the evidence arrive in. A split stays: it gave the later IDFV a device of its own.
    @Test(arguments: [ClonePolicy.Action.flag, .split])
    func aForgottenDeviceKeepsNoCloneEvidenceInAnyOrder(action: ClonePolicy.Action) throws {
        var node = Node("node-a", policy: try ClonePolicy(action: action))
        let device = try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvA, onDay: 0).device
        try node.register("com.v.a", keychain: Self.keychain, idfv: Self.idfvB, onDay: 10)
        try node.register("com.v.b", keychain: Self.keychain, idfv: Self.idfvA, onDay: 12)
        #expect(node.clones.count == 1)
        let forget = Operation.forget(ForgetOp(device: try #require(node.state.canonical(of: device)), vendor: Vendor(trusted: "com.v")))
        node.state.apply(forget)
        node.logged.append(forget)
        var records = [SnapshotRecord]()
        node.state.forEachSnapshotRecord { records.append($0) }
        let marks = records.compactMap { record -> CloneOp? in if case .clone(let op) = record { op } else { nil } }
        let later = records.filter { if case .laterIDFV = $0 { true } else { false } }
        #expect(marks.map(\.action) == (action == .flag ? [] : [.split]))
        #expect(later.isEmpty, "\(later)")
        #expect(node.state.suspectedClones().isEmpty)
        let expected = node.state.snapshot()
        var random = SplitMix64(seed: 7)
        for _ in 0..<40 {
            var replica = RegistryState()
            for op in node.logged.shuffled(using: &random) { replica.apply(op) }
            #expect(replica.digest == node.state.digest)
            #expect(replica.snapshot() == expected)
        }
    }
}

extension CloneTests {
    static func sealed(_ idfv: String) throws -> Identifier {
        try Identifier(PresentedIdentifier(rawKind: 2, text: idfv))
    }
}

/// Presented identifiers as an app sends them.
enum RegisterPresented {
    static func of(keychain: String?, idfv: String?) -> [PresentedIdentifier] {
        var presented = [PresentedIdentifier]()
        if let keychain { presented.append(PresentedIdentifier(rawKind: 1, text: keychain)) }
        if let idfv { presented.append(PresentedIdentifier(rawKind: 2, text: idfv)) }
        return presented
    }
}
