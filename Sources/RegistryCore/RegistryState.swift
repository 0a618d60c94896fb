/// Every device, claim and alias a node knows, as a plain value with no I/O.
///
/// The state is a join of operations: claims are a union, devices found to be one are merged by
/// union-find whose root is always the winner the written rule names, and app sightings keep the
/// earliest first-seen and latest last-seen. Applying the same set of operations in any order,
/// any number of times, gives the same state.
///
/// Layout, for memory at tens of millions of devices: each device is a 56-byte ``Slot`` in a
/// paged array and is named inside the state by its slot number; vendors, bundles and nodes are
/// interned to 4-byte numbers; the device index keeps tags of the IDs, not the IDs
/// (``DeviceIndex``). The rare extras (a second app, merged aliases) live in side tables keyed by
/// the canonical slot.
public struct RegistryState: Sendable {
    /// One device.
    struct Slot: Sendable {
        let id: UUID128
        /// HLC of creation (raw): the earliest, when more than one node created the device.
        var created: UInt64
        /// Interned origin node of that creation.
        var origin: UInt32
        /// Interned vendor: the one the device was created in, or the one a move joined that to
        /// (``VendorAliases``).
        var vendor: UInt32
        /// The slot of the winner of this device's merge set; its own slot when canonical.
        /// Always one hop.
        var canonical: UInt32
        /// On a canonical slot: the interned bundle of its first app, or ``noApp``.
        var app: UInt32
        var firstSeen: UInt64
        var lastSeen: UInt64
    }

    /// An app sighting beyond a device's first.
    struct AppSlot: Sendable {
        let bundle: UInt32
        var firstSeen: UInt64
        var lastSeen: UInt64
    }

    /// A (vendor, identifier) pair: the identifier's UUID, and the interned vendor and the
    /// kind packed into one word (kinds are below 16), 20 bytes in all.
    struct ClaimKey: HashIndexKey, Hashable {
        let value: UUID128
        let scope: UInt32

        init(vendor: UInt32, identifier: Identifier) {
            precondition(identifier.kind.rawValue < 16 && vendor < 1 << 28)
            self.value = identifier.value
            self.scope = vendor << 4 | UInt32(identifier.kind.rawValue)
        }

        var vendor: UInt32 { scope >> 4 }
        var kind: Int32 { Int32(scope & 0xF) }

        func hash(seed: UInt64) -> UInt64 {
            foldedMultiply(value.hash(seed: seed) ^ UInt64(scope), 0x8EBC_6AF0_9C88_C6E3 ^ seed)
        }
    }

    static let noApp = UInt32.max

    var slots = PagedArray<Slot>()
    /// Device ID to slot, for every slot (aliases too).
    var slotOf: DeviceIndex
    /// (vendor, identifier) to the slot that owns the claim. When several devices claimed it
    /// (only replicas that could not hear each other let that happen), the owner is the one with
    /// the lowest device ID. The rule reads only what never changes: a rule on the merge order
    /// would depend on delivery order, because a device created on several nodes moves earlier
    /// in that order as its earlier creations arrive, after it may have lost a claim. Lookups go
    /// through the owner to its canonical device, so which claimant owns a claim changes no
    /// answer but a registration's `replaced` list.
    var claims: HoldableIndex<ClaimKey>
    /// Canonical slot to its apps after the first.
    var moreApps: [UInt32: [AppSlot]] = [:]
    /// Canonical slot to the slots merged into it.
    var members: [UInt32: [UInt32]] = [:]
    var vendors = Interner<Vendor>()
    var bundles = Interner<BundleID>()
    var origins = Interner<NodeID>()
    public internal(set) var aliasCount = 0
    /// The cluster's members: every node that joined, and whether it was removed.
    public internal(set) var clusterMembers: [NodeID: Member] = [:]
    /// Counts membership changes applied, so that a reader can tell cheaply whether the members
    /// may have changed since it last looked.
    public internal(set) var membershipChanges = 0
    /// Every account's binding changes.
    var accountTable = AccountTable()
    /// Every device ID a forget named (``ForgetOp``), known to this replica as a device or not.
    var tombstones = Set<UUID128>()
    /// The tombstones whose device this replica has not received, with the vendor their forget
    /// named; nil for one restored from a snapshot, which keeps no vendor (it then holds back
    /// every vendor's new devices: ``register(_:at:origin:holdingBack:mint:)``).
    var forgottenNotReceived: [UUID128: Vendor?] = [:]
    /// The canonical slots of the merge sets that hold a tombstoned device: the gone sets.
    var goneRoots = Set<UInt32>()
    /// Operations applied since this state was built that named a gone device and were dropped
    /// for it, wholly or in part (a bind, an app sighting, clone evidence, a second forget): their
    /// bytes went to the journal all the same (``erasures``). Not part of the state: a replica
    /// built another way counts otherwise.
    var goneArrivals = 0
    /// Every change of the cluster's vendor rules, and the rules they make.
    public private(set) var vendorRuleHistory = VendorRuleHistory()
    /// Counts vendor rule changes applied, so that a reader can tell cheaply whether the rules
    /// may have changed since it last looked.
    public private(set) var vendorRuleChanges = 0
    /// The order-independent digest of the content (see ``StateDigest``), kept as it changes.
    public internal(set) var digest: UInt64 = 0
    var vendorDigests = NameDigests()
    /// The changes applied, while a node records them for its watchers (``FeedRecording``); nil:
    /// nothing is recorded (a snapshot's state, a test's).
    var feedRecording: FeedRecording?
    var originDigests = NameDigests()
    var bundleDigests = NameDigests()
    /// Device slot to the IDFVs its keychain took after it was created (``LaterIDFV``): the
    /// evidence a keychain clone is looked for in. One per IDFV reset or second phone, kept for
    /// good (nothing prunes it).
    var laterIDFVs: [UInt32: [LaterIDFV]] = [:]
    /// Every clone operation held (``CloneOp``).
    var clones = Set<CloneOp>()
    /// The keys of ``clones``: what is marked already.
    var cloneKeys = Set<CloneKey>()
    /// Keychain claims a split contested, and IDFV claims it moved (to their
    /// ``Identifier/splitSuccessor``): built from ``clones``, under the vendors they are filed in.
    var contestedClaims = Set<ClaimKey>()
    var splitClaims = Set<ClaimKey>()

    /// A state whose indexes are sized for `devices` devices (with two claims each) from the
    /// start, so that they do not grow, and do not move entries into bigger tables, until the
    /// registry holds more; 0 starts them small. The tables take 80 bytes per expected
    /// device, from `tables`.
    ///
    /// `claimSeed` seeds the claim index's hash, which otherwise is random. A node gives each of
    /// its states the same one (derived from its cluster secret): a snapshot lists the claims in
    /// the index's order (``forEachSnapshotRecord(_:)``), so that restoring them into an index of
    /// the same seed writes its buckets front to back rather than at random.
    public init(expectedDevices devices: Int = 0, claimSeed: UInt64? = nil, tables: any TableAllocator = HeapTableAllocator()) {
        precondition(devices >= 0, "expected devices must not be negative")
        slotOf = DeviceIndex(capacity: DeviceIndex.capacity(holding: devices), allocator: tables)
        claims = HoldableIndex(
            HashIndex(
                capacity: HashIndex<ClaimKey>.capacity(holding: 2 * devices), seed: claimSeed ?? .random(in: .min ... .max),
                allocator: tables))
    }

    /// The most devices ``init(expectedDevices:claimSeed:tables:)`` accepts: slot numbers are 32-bit.
    public static let maxExpectedDevices = 1 << 30

    /// Canonical devices.
    public var deviceCount: Int { slots.count - aliasCount }
    /// Devices and aliases: the records ``init(expectedDevices:claimSeed:tables:)`` sizes the indexes for.
    public var slotCount: Int { slots.count }
    /// (vendor, identifier) claims.
    public var claimCount: Int { claims.count }

    /// The seed of the claim index's hash (see ``init(expectedDevices:claimSeed:tables:)``).
    public var claimIndexSeed: UInt64 { claims.main.seed }

    /// The buckets of the device-ID and claim indexes' current tables (for tests, and for the
    /// floor of bench/Benchmarks/BatchApplying, which sizes its tables alike).
    public var indexCapacities: (devices: Int, claims: Int) { (slotOf.capacity, claims.capacity) }

    /// Sizes the indexes at once for `slots` devices and aliases and `claims` claims in all, when
    /// that is more than their next tables would hold (``HashIndex/reserve(holding:)``): for a
    /// state about to take that many (a node catching up from a peer that holds them), which
    /// would otherwise grow through every size on the way. Changes no content. Returns whether
    /// either index acted.
    @discardableResult
    public mutating func reserve(slots: Int, claims claimEntries: Int) -> Bool {
        let devices = slotOf.reserve(holding: min(slots, Self.maxExpectedDevices))
        let claimed = claims.reserve(holding: min(claimEntries, 2 * Self.maxExpectedDevices))
        return devices || claimed
    }

    /// The bytes of the index tables ``reserve(slots:claims:)`` would allocate for these counts
    /// (as it bounds them), beside the tables the state already has.
    public static func indexTableBytes(slots: Int, claims claimEntries: Int) -> Int {
        DeviceIndex.tableBytes(holding: min(max(0, slots), maxExpectedDevices))
            + HashIndex<ClaimKey>.tableBytes(holding: min(max(0, claimEntries), 2 * maxExpectedDevices))
    }

    // MARK: - Register

    /// Asks for the index buckets that registering a batch will touch, before any of it is
    /// registered: for each registration, the probes of its claims, and for each ID it may give a
    /// new device, the probe where that ID's entry would go (``HashIndex/touch(_:)``). The indexes
    /// are far bigger than the CPU's caches, so each of those is a cache miss, and one after
    /// another they were the biggest single cost of a registration in a running node. Asked for
    /// here in tight loops, the misses overlap (the CPU keeps several in flight), and the
    /// registrations that follow find the buckets cached. Asking for them all before the first
    /// registration cost less than asking a few registrations ahead of each, as single requests
    /// do (docs/performance.md, "Warming without waiting"). Only a hint: nothing depends on it.
    public mutating func warm(for registrations: [Registration], newDevices: [DeviceID]) {
        var keys = [ClaimKey]()
        keys.reserveCapacity(2 * registrations.count)
        for registration in registrations {
            guard let vendorNumber = vendors.number(of: registration.vendor) else { continue }
            for identifier in registration.identifiers { keys.append(ClaimKey(vendor: vendorNumber, identifier: identifier)) }
        }
        warmth = claims.touch(keys) &+ slotOf.touch(newDevices.map(\.uuid))
    }

    /// How many operations ahead of the one it applies (or requests ahead of the one it decides)
    /// a caller asks for buckets (``prefetch(for:)-(Operation)``, ``prefetch(for:)-(Registration)``):
    /// far enough for the memory to arrive in time, near enough that the buckets are still cached
    /// when their operation comes.
    public static let prefetchDistance = 8

    /// Asks the CPU for the index buckets that applying `operation` looks up first, a
    /// registration's device and claims (``Prefetch``): a replay or a peer's batch that asks some
    /// operations ahead finds them cached, instead of waiting for each in turn.
    public func prefetch(for operation: Operation) {
        guard case .registration(let op) = operation else { return }
        slotOf.prefetch(op.device.id.uuid)
        prefetchClaims(of: op.claims, in: op.device.vendor)
    }

    /// Asks the CPU for the claim index buckets that registering `registration` looks up: for a
    /// caller that decides requests one at a time (single registrations, each its own request),
    /// asking some requests ahead, as a replay does with ``prefetch(for:)-(Operation)``. The device
    /// it may create is not known yet, so its bucket is not asked for.
    public func prefetch(for registration: Registration) {
        prefetchClaims(of: registration.identifiers, in: registration.vendor)
    }

    /// Asks for the claim index buckets of `identifiers` in `vendor`; nothing for a vendor the
    /// state has not numbered, which holds no claims.
    private func prefetchClaims(of identifiers: IdentifierList, in vendor: Vendor) {
        guard let number = vendors.number(of: vendor) else { return }
        for identifier in identifiers { claims.prefetch(ClaimKey(vendor: number, identifier: identifier)) }
    }

    /// What ``warm(for:newDevices:)`` read last (0 unless an index was growing): no meaning, kept
    /// so that the compiler cannot drop the reads.
    private(set) var warmth: UInt32 = 0

    /// Decides what registering `registration` at `now` changes, applies it, and returns the
    /// operation to log with the outcome to answer. `mint` is called only when a device is created.
    public mutating func register(
        _ registration: Registration, at now: HLCTimestamp, origin: NodeID, mint: (_ generation: UInt32) -> DeviceID
    ) -> (operation: RegistrationOp, outcome: RegistrationOutcome) {
        register(registration, at: now, origin: origin, holdingBack: false, mint: mint)!
    }

    /// As ``register(_:at:origin:mint:)``, unless `holdingBack` and the registration would claim
    /// an identifier nobody holds (for a new device, or one it adds to a known device) in a
    /// vendor of which this replica holds a forget of a device it has not received
    /// (``forgottenDeviceAwaited(in:)``): then nil, and nothing changes.
    ///
    /// The forgotten device's claims are unknown here, so the claim could be one of them (a
    /// keychain UUID beside the IDFV, say) and, once the forgotten device's registration
    /// arrives, merge the claiming device into it and bury it: a device nobody forgot would
    /// answer GONE on every replica. Once it has arrived, its claims send the registration on to
    /// the next claim generation (``liveClaim(of:vendor:passing:)``). A node asks again later: the
    /// registration that the forget's node had before it reaches every replica.
    public mutating func register(
        _ registration: Registration, at now: HLCTimestamp, origin: NodeID, holdingBack: Bool, mint: (_ generation: UInt32) -> DeviceID
    ) -> (operation: RegistrationOp, outcome: RegistrationOutcome)? {
        let vendor = vendorRuleHistory.aliases.filing(registration.vendor)
        // Arrays stay empty, and unallocated, for a first install.
        var owners = [UInt32]()
        var roots = [UInt32]()
        let vendorNumber = vendors.number(of: vendor)
        // The claim keys to look up and claim: the identifiers themselves, unless a forget
        // released one of them (then the generation after the last released one).
        var keys = registration.identifiers
        var generations: [UInt32] = []
        if let vendorNumber, !goneRoots.isEmpty || !splitClaims.isEmpty {
            let live = keys.map { liveClaim(of: $0, vendor: vendorNumber, passing: &owners) }
            keys = IdentifierList(live.lazy.map(\.key))
            generations = live.map(\.generation)
        }
        // A keychain UUID links nothing, and is neither looked up nor claimed, when the IDFV
        // presented with it is one a split moved (its walk passed a split claim, whose owner is
        // in `owners` now), or when a split contested it (``CloneOp``): the IDFV decides alone.
        var contested: Identifier?
        if !owners.isEmpty {
            contested = keys.first { $0.kind == .keychain }
        } else if let vendorNumber, !contestedClaims.isEmpty, keys.contains(where: { $0.kind == .idfv }) {
            contested = keys.first { $0.kind == .keychain && contestedClaims.contains(ClaimKey(vendor: vendorNumber, identifier: $0)) }
        }
        if let vendorNumber {
            for identifier in keys where identifier != contested {
                guard let owner = claims.value(for: ClaimKey(vendor: vendorNumber, identifier: identifier)) else { continue }
                if !owners.contains(owner) { owners.append(owner) }
                let root = slots[owner].canonical
                if !roots.contains(root) { roots.append(root) }
            }
        }

        let operation: RegistrationOp
        if roots.isEmpty {
            if holdingBack, waitsForForgottenDevice(vendor) { return nil }
            let (id, source, generation) = newDeviceID(for: registration, generations: generations, mint: mint)
            // Minted past a forgotten ID: the identifier it is minted from claims that generation
            // too, so that no replica finds the claim of the forgotten device under it.
            if let source, generation > 0 { keys[source] = registration.identifiers[source].atGeneration(generation) }
            let ref = DeviceRef(id: id, created: now, origin: origin, vendor: vendor)
            operation = RegistrationOp(
                device: ref, bundle: registration.bundle, claims: contested == nil ? keys : keys.filter { $0 != contested }, merged: [], seen: now)
        } else {
            var winner = roots[0]
            for root in roots.dropFirst() where wins(root, over: winner) { winner = root }
            let unclaimed = keys.filter {
                $0 != contested && claims.value(for: ClaimKey(vendor: vendorNumber!, identifier: $0)) == nil
            }
            if holdingBack, !unclaimed.isEmpty, waitsForForgottenDevice(vendor) { return nil }
            operation = RegistrationOp(
                device: ref(winner), bundle: registration.bundle, claims: unclaimed,
                merged: roots.filter { $0 != winner }.map { ref($0) }, seen: now)
        }
        let device = applied(operation)

        let canonical = slots[device].canonical
        let canonicalID = DeviceID(slots[canonical].id)
        let outcome = RegistrationOutcome(
            device: canonicalID, created: roots.isEmpty, vendor: vendor,
            replaced: replaced(owners: owners, roots: roots, winner: canonical), rejected: registration.rejected)
        return (operation, outcome)
    }

    /// The claim of `identifier` in vendor number `vendor` that a registration looks up and
    /// claims, and its generation (see ``Identifier/atGeneration(_:)``): the first generation
    /// whose owner is not gone, or that nobody claimed; and past a claim a split moved, its
    /// successor (``CloneOp``). The owners of the moved claims passed are added to `passed`, for
    /// the answer's replaced devices.
    func liveClaim(of identifier: Identifier, vendor: UInt32, passing passed: inout [UInt32]) -> (key: Identifier, generation: UInt32) {
        var generation: UInt32 = 0
        var key = identifier
        while let owner = claims.value(for: ClaimKey(vendor: vendor, identifier: key)) {
            if !splitClaims.isEmpty, splitClaims.contains(ClaimKey(vendor: vendor, identifier: key)) {
                if !passed.contains(owner) { passed.append(owner) }
                key = key.splitSuccessor
                continue
            }
            guard goneRoots.contains(slots[owner].canonical) else { break }
            generation += 1
            key = identifier.atGeneration(generation)
        }
        return (key, generation)
    }

    /// The ID of a device that `registration` creates, the identifier it is minted from (by
    /// index, nil for a random ID) and the claim generation it was minted in. A minted ID
    /// (``DeviceID/minted(vendor:idfv:generation:key:)``) takes the claim generation of the
    /// identifier it is minted from, the IDFV or else the keychain UUID, so that two nodes creating
    /// the device at once mint the same ID; and the next generation again while the ID is a
    /// forgotten one (a node can hold a forget before the forgotten device's registration), so
    /// that a forgotten ID is never handed out again.
    private func newDeviceID(
        for registration: Registration, generations: [UInt32], mint: (UInt32) -> DeviceID
    ) -> (id: DeviceID, source: Int?, generation: UInt32) {
        // Nothing was ever forgotten here: every claim is in generation 0 (the common case).
        if tombstones.isEmpty { return (mint(0), nil, 0) }
        let source = registration.identifiers.firstIndex { $0.kind == .idfv } ?? registration.identifiers.firstIndex { $0.kind == .keychain }
        var generation = source.flatMap { generations.isEmpty ? nil : generations[$0] } ?? 0
        var id = mint(generation)
        while isGone(id) {
            generation += 1
            id = mint(generation)
        }
        return (id, source, generation)
    }

    /// What a registration tells the app it no longer should use: every device, other than the
    /// winner, that the presented identifiers led to before it. That is the device that owns
    /// each identifier's claim (see ``claims``; listed again on every later registration that
    /// presents it, so an app that missed an answer still learns), and the canonical device each
    /// one resolved to (the winner of an earlier merge, listed by the registration that merges it
    /// away). Sorted.
    private func replaced(owners: [UInt32], roots: [UInt32], winner: UInt32) -> [DeviceID] {
        if owners.count <= 1 && roots.count <= 1 && owners.first == winner { return [] }
        var slots = owners
        for root in roots where !slots.contains(root) { slots.append(root) }
        return slots.filter { $0 != winner }.map { DeviceID(self.slots[$0].id) }.sorted()
    }

    // MARK: - Apply (the join)

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .registration(let op): apply(op)
        case .membership(let op): apply(op)
        case .binding(let change): apply(change)
        case .forget(let op): apply(op)
        case .vendorRule(let change): apply(change)
        case .clone(let op): apply(op)
        }
    }

    /// Adds a change of the vendor rules; a change held already changes nothing. A change that
    /// moves vendors files their devices, claims and binding changes under the vendor they joined.
    public mutating func apply(_ change: VendorRuleChange) {
        let rulesBefore = feedRecording != nil ? feedRules : nil
        guard hold(change) else { return }
        if change.move != nil {
            fileUnderAliases()
            indexClones()
        }
        if let rulesBefore { recordPolicyChanges(rulesBefore: rulesBefore) }
    }

    /// Adds a change of the vendor rules to the history, and nothing more; false when held.
    mutating func hold(_ change: VendorRuleChange) -> Bool {
        guard vendorRuleHistory.insert(change) else { return false }
        vendorRuleChanges &+= 1
        digest &+= StateDigest.vendorRule(change)
        return true
    }

    /// Adds a tombstone: the merge set of `op.device` is gone, now or once the device arrives.
    public mutating func apply(_ op: ForgetOp) {
        guard tombstones.insert(op.device.uuid).inserted else {
            goneArrivals += 1
            return
        }
        digest &+= StateDigest.tombstone(op.device.uuid)
        if let number = slotNumber(of: op.device.uuid) {
            bury(slots[number].canonical)
        } else {
            forgottenNotReceived.updateValue(op.vendor, forKey: op.device.uuid)
            purgeBindings(naming: [op.device.uuid])
            if feedRecording != nil { record(.forgotten(devices: [op.device], vendor: nil)) }
        }
    }

    /// Makes the merge set that canonical slot `root` heads gone, or keeps it so: its apps, the
    /// binding changes that name its devices and its clone evidence go; its devices, claims and
    /// splits stay.
    mutating func bury(_ root: UInt32) {
        goneRoots.insert(root)
        let slot = slots[root]
        if slot.app != Self.noApp {
            digest &-= appFact(on: root, bundle: slot.app, first: slot.firstSeen, last: slot.lastSeen)
            slots[root].app = Self.noApp
            slots[root].firstSeen = 0
            slots[root].lastSeen = 0
        }
        for app in moreApps.removeValue(forKey: root) ?? [] {
            digest &-= appFact(on: root, bundle: app.bundle, first: app.firstSeen, last: app.lastSeen)
        }
        purgeBindings(naming: ([root] + (members[root] ?? [])).map { slots[$0].id })
        forgetCloneEvidence(of: [root] + (members[root] ?? []))
        if feedRecording != nil {
            record(.forgotten(devices: ([root] + (members[root] ?? [])).map { DeviceID(slots[$0].id) }, vendor: vendors[slot.vendor]))
        }
    }

    /// Removes the binding changes that name any of `devices`.
    private mutating func purgeBindings(naming devices: [UUID128]) {
        // The remaining changes of an account may bind a device again (one a forgotten bind
        // had replaced): what the purge does to the accounts, for the watchers.
        let accounts = feedRecording == nil || accountTable.changeCount == 0 ? [] : accountTable.accounts(naming: devices)
        let bound = accounts.map { boundDevices(of: $0) }
        defer {
            for (account, before) in zip(accounts, bound) { recordBindingEvents(of: account, before: before, touched: DeviceID(devices[0])) }
        }
        for change in accountTable.remove(naming: devices) {
            digest &-= bindingFact(change, vendor: vendors.number(of: change.vendor)!, origin: origins.number(of: change.origin)!)
        }
    }

    /// Adds a binding change (see ``AccountBindings``); a change held already changes nothing.
    public mutating func apply(_ change: BindingChange) {
        let change = filing(change)
        let key = AccountKey(vendor: change.vendor, account: change.account)
        let before = feedRecording != nil ? boundDevices(of: key) : nil
        // The changes of a gone device are not kept (``ForgetOp``); the watchers hear that the
        // account stays as it is.
        if isGone(change.device) {
            goneArrivals += 1
            if let before { recordBindingEvents(of: key, before: before, change: change, touched: change.device) }
            return
        }
        guard accountTable.insert(change) else { return }
        if let before { recordBindingEvents(of: key, before: before, change: change, touched: change.device) }
        // Interned so that a snapshot can name them by number.
        let vendor = vendors.intern(change.vendor)
        let origin = origins.intern(change.origin)
        digest &+= bindingFact(change, vendor: vendor, origin: origin)
    }

    /// Joins a membership change in (see ``Member``).
    public mutating func apply(_ op: MembershipOp) {
        membershipChanges &+= 1
        let old = clusterMembers[op.node]
        let new = old.map { $0.joined(with: op) } ?? Member(op)
        if let old { digest &-= StateDigest.member(op.node, old) }
        clusterMembers[op.node] = new
        digest &+= StateDigest.member(op.node, new)
    }

    public mutating func apply(_ op: RegistrationOp) {
        _ = applied(op)
    }

    /// Applies one registration; returns the slot of its device.
    private mutating func applied(_ op: RegistrationOp) -> UInt32 {
        let device = slot(for: op.device)
        let vendor = slots[device].vendor
        for identifier in op.claims { claim(ClaimKey(vendor: vendor, identifier: identifier), for: device) }
        // An IDFV claimed for a device created earlier: its keychain took a later IDFV.
        if op.seen.rawValue > op.device.created.rawValue, !op.claims.isEmpty, let idfv = op.claims.first(where: { $0.kind == .idfv }) {
            noteLaterIDFV(idfv.value, appeared: op.seen.rawValue, on: device)
        }
        // Every device the deciding node merged, whatever vendor its ref names: a node that has
        // not applied a vendor move holds sets filed under both of the vendors it joins, and a
        // merge it answered must hold on every replica, before the move arrives and after.
        for other in op.merged { union(slot(for: other), device) }
        see(bundles.intern(op.bundle), first: op.seen.rawValue, last: op.seen.rawValue, on: slots[device].canonical)
        return device
    }

    /// Claims `key` for slot `device`. A key another device claimed stays with the lower device ID
    /// (see ``claims``), and the two devices merge.
    mutating func claim(_ key: ClaimKey, for device: UInt32) {
        // One hash for the common case, a claim nobody held.
        guard let owner = claims.set(key, device) else {
            digest &+= claimFact(key, owner: device)
            return
        }
        guard owner != device else { return }
        if slots[owner].id < slots[device].id {
            claims.set(key, owner)
        } else {
            digest &+= claimFact(key, owner: device) &- claimFact(key, owner: owner)
        }
        union(owner, device)
    }

    /// The slot of device `id`; nil when this replica does not know it.
    @inline(__always)
    func slotNumber(of id: UUID128) -> UInt32? {
        slotOf.slot(of: id) { slots[$0].id }
    }

    /// The slot of `ref`, created when the device is new to this replica.
    mutating func slot(for ref: DeviceRef) -> UInt32 {
        guard let existing = slotNumber(of: ref.id.uuid) else { return appendSlot(ref) }
        joinCreation(of: existing, with: ref)
        return existing
    }

    /// Several nodes may create one device: a minted ID (``DeviceID/minted(vendor:idfv:generation:key:)``)
    /// is the same wherever the same first install arrives. Each creation names its own HLC and
    /// origin, so every replica keeps the earliest by (created, origin), whichever it saw first,
    /// and the device takes its place in the merge order from that: when it now wins against
    /// the winner of its set, it becomes the winner.
    private mutating func joinCreation(of number: UInt32, with ref: DeviceRef) {
        let slot = slots[number]
        let created = ref.created.rawValue
        guard created <= slot.created else { return }
        if created == slot.created {
            guard ref.origin != origins[slot.origin], ref.origin < origins[slot.origin] else { return }
        }
        digest &-= deviceFact(number)
        slots[number].created = created
        slots[number].origin = origins.intern(ref.origin)
        digest &+= deviceFact(number)
        if slot.canonical != number, wins(number, over: slot.canonical) { reroot(slot.canonical, to: number) }
    }

    /// Makes `winner`, a member of the set `root` heads, the head of that set.
    private mutating func reroot(_ root: UInt32, to winner: UInt32) {
        var moved = members.removeValue(forKey: root) ?? []
        moved.removeAll { $0 == winner }
        moved.append(root)
        for member in moved + [winner] { digest &-= deviceFact(member) }
        for member in moved { slots[member].canonical = winner }
        slots[winner].canonical = winner
        for member in moved + [winner] { digest &+= deviceFact(member) }
        members[winner] = moved
        if goneRoots.remove(root) != nil { goneRoots.insert(winner) }
        moveApps(from: root, to: winner)
        if feedRecording != nil { recordMerge(of: winner) }
    }

    /// Joins the app sightings of `from`, no longer canonical, into canonical slot `to`.
    private mutating func moveApps(from: UInt32, to: UInt32) {
        let old = slots[from]
        if old.app != Self.noApp {
            digest &-= appFact(on: from, bundle: old.app, first: old.firstSeen, last: old.lastSeen)
            slots[from].app = Self.noApp
            see(old.app, first: old.firstSeen, last: old.lastSeen, on: to)
        }
        for app in moreApps.removeValue(forKey: from) ?? [] {
            digest &-= appFact(on: from, bundle: app.bundle, first: app.firstSeen, last: app.lastSeen)
            see(app.bundle, first: app.firstSeen, last: app.lastSeen, on: to)
        }
    }

    /// A new canonical slot for `ref`, which the state does not know yet.
    @discardableResult
    mutating func appendSlot(_ ref: DeviceRef) -> UInt32 {
        let number = UInt32(slots.count)
        // Binding changes that named the device before it arrived count from now on: what that
        // does to their accounts, for the watchers.
        let accounts = feedRecording == nil || accountTable.changeCount == 0 ? [] : accountTable.accounts(naming: [ref.id.uuid])
        let bound = accounts.map { boundDevices(of: $0) }
        slots.append(
            Slot(
                id: ref.id.uuid, created: ref.created.rawValue, origin: origins.intern(ref.origin),
                vendor: vendors.intern(vendorRuleHistory.aliases.filing(ref.vendor)), canonical: number, app: Self.noApp, firstSeen: 0, lastSeen: 0))
        slotOf.insert(ref.id.uuid, slot: number)
        digest &+= deviceFact(number)
        if feedRecording != nil {
            record(.created(device: ref.id, vendor: vendors[slots[number].vendor]))
            for (account, before) in zip(accounts, bound) { recordBindingEvents(of: account, before: before, touched: ref.id) }
        }
        if !tombstones.isEmpty, tombstones.contains(ref.id.uuid) {
            bury(number)
            forgottenNotReceived.removeValue(forKey: ref.id.uuid)
        }
        return number
    }

    /// Joins an app sighting into canonical slot `root`: earliest first-seen, latest last-seen.
    mutating func see(_ bundle: UInt32, first: UInt64, last: UInt64, on root: UInt32) {
        // A gone set keeps no apps.
        if !goneRoots.isEmpty, goneRoots.contains(root) {
            goneArrivals += 1
            return
        }
        if slots[root].app == Self.noApp {
            slots[root].app = bundle
            slots[root].firstSeen = first
            slots[root].lastSeen = last
            digest &+= appFact(on: root, bundle: bundle, first: first, last: last)
        } else if slots[root].app == bundle {
            let (oldFirst, oldLast) = (slots[root].firstSeen, slots[root].lastSeen)
            let (newFirst, newLast) = (min(oldFirst, first), max(oldLast, last))
            guard (newFirst, newLast) != (oldFirst, oldLast) else { return }
            slots[root].firstSeen = newFirst
            slots[root].lastSeen = newLast
            digest &+= appFact(on: root, bundle: bundle, first: newFirst, last: newLast)
                &- appFact(on: root, bundle: bundle, first: oldFirst, last: oldLast)
        } else if let index = moreApps[root]?.firstIndex(where: { $0.bundle == bundle }) {
            let old = moreApps[root]![index]
            let (newFirst, newLast) = (min(old.firstSeen, first), max(old.lastSeen, last))
            guard (newFirst, newLast) != (old.firstSeen, old.lastSeen) else { return }
            moreApps[root]![index].firstSeen = newFirst
            moreApps[root]![index].lastSeen = newLast
            digest &+= appFact(on: root, bundle: bundle, first: newFirst, last: newLast)
                &- appFact(on: root, bundle: bundle, first: old.firstSeen, last: old.lastSeen)
        } else {
            moreApps[root, default: []].append(AppSlot(bundle: bundle, firstSeen: first, lastSeen: last))
            digest &+= appFact(on: root, bundle: bundle, first: first, last: last)
        }
    }

    /// Merges the sets of `a` and `b` under the rule's winner, keeping every alias one hop deep.
    mutating func union(_ a: UInt32, _ b: UInt32) {
        let rootA = slots[a].canonical
        let rootB = slots[b].canonical
        guard rootA != rootB else { return }
        let (winner, loser) = wins(rootA, over: rootB) ? (rootA, rootB) : (rootB, rootA)
        // What the merge does to accounts bound to either set, for the watchers.
        let accounts = feedRecording == nil ? [] : Array(Set(accountsNaming(setOf: rootA) + accountsNaming(setOf: rootB))).sorted()
        let bound = accounts.map { boundDevices(of: $0) }
        let gone = !goneRoots.isEmpty && (goneRoots.remove(loser) != nil || goneRoots.contains(winner))
        let moved = [loser] + (members.removeValue(forKey: loser) ?? [])
        for member in moved {
            digest &-= deviceFact(member)
            slots[member].canonical = winner
            digest &+= deviceFact(member)
        }
        members[winner, default: []].append(contentsOf: moved)
        moveApps(from: loser, to: winner)
        aliasCount += 1
        if feedRecording != nil {
            recordMerge(of: winner)
            for (account, before) in zip(accounts, bound) {
                recordBindingEvents(of: account, before: before, touched: DeviceID(slots[winner].id))
            }
        }
        // A set that meets a gone set is gone with it.
        if gone { bury(winner) }
    }

    /// The merge rule on slots (see ``DeviceRef/winsMerge(against:)``).
    func wins(_ a: UInt32, over b: UInt32) -> Bool {
        let (x, y) = (slots[a], slots[b])
        if x.created != y.created { return x.created < y.created }
        if x.origin != y.origin { return origins[x.origin] < origins[y.origin] }
        return x.id < y.id
    }

    func ref(_ number: UInt32) -> DeviceRef {
        let slot = slots[number]
        return DeviceRef(
            id: DeviceID(slot.id), created: HLCTimestamp(rawValue: slot.created), origin: origins[slot.origin],
            vendor: vendors[slot.vendor])
    }

    // MARK: - Queries

    /// True when `id` was forgotten: a forget named it, or a device merged with it (``ForgetOp``).
    public func isGone(_ id: DeviceID) -> Bool {
        if tombstones.isEmpty { return false }
        if tombstones.contains(id.uuid) { return true }
        guard let number = slotNumber(of: id.uuid) else { return false }
        return goneRoots.contains(slots[number].canonical)
    }

    /// A device of `vendor` (as filed under the vendor rules) that a forget named and this
    /// replica has not received; nil when there is none. While there is one, registrations that
    /// would claim an identifier new to the vendor wait for it
    /// (``register(_:at:origin:holdingBack:mint:)``).
    public func forgottenDeviceAwaited(in vendor: Vendor) -> DeviceID? {
        guard !forgottenNotReceived.isEmpty else { return nil }
        let aliases = vendorRuleHistory.aliases
        return forgottenNotReceived.first { $0.value.map { aliases.filing($0) == vendor } ?? true }.map { DeviceID($0.key) }
    }

    /// Whether a claim new to `vendor` waits (``forgottenDeviceAwaited(in:)``); at once false when
    /// no forgotten device is awaited at all, the common case.
    @inline(__always)
    private func waitsForForgottenDevice(_ vendor: Vendor) -> Bool {
        !forgottenNotReceived.isEmpty && forgottenDeviceAwaited(in: vendor) != nil
    }

    /// Devices forgotten: the device IDs the forgets named.
    public var tombstoneCount: Int { tombstones.count }

    /// Grows with every forget held and every operation since applied that named a gone device
    /// (``goneArrivals``): each put bytes of a forgotten device in the journal, which an erasure
    /// snapshot must take off the disk in time (`--erasure-within`).
    public var erasures: Int { tombstones.count + goneArrivals }

    /// The canonical device of `id`, which may be an alias; nil when unknown.
    public func canonical(of id: DeviceID) -> DeviceID? {
        slotNumber(of: id.uuid).map { DeviceID(slots[slots[$0].canonical].id) }
    }

    /// The vendor of device `id`; nil when unknown.
    public func vendor(of id: DeviceID) -> Vendor? {
        slotNumber(of: id.uuid).map { vendors[slots[$0].vendor] }
    }

    /// The canonical record of `id`, which may be an alias.
    public func resolve(_ id: DeviceID) -> DeviceRecord? {
        slotNumber(of: id.uuid).map { record(of: slots[$0].canonical) }
    }

    /// The canonical record of the device `identifier` is claimed by within `vendor`; nil when
    /// nobody claims it, or only forgotten devices did (their claims are released).
    public func lookup(vendor: Vendor, identifier: Identifier) -> DeviceRecord? {
        guard let vendorNumber = vendors.number(of: vendorRuleHistory.aliases.filing(vendor)) else { return nil }
        var passed = [UInt32]()
        let key = goneRoots.isEmpty && splitClaims.isEmpty ? identifier : liveClaim(of: identifier, vendor: vendorNumber, passing: &passed).key
        guard let owner = claims.value(for: ClaimKey(vendor: vendorNumber, identifier: key)) else { return nil }
        return record(of: slots[owner].canonical)
    }

    /// The binding changes of `account` in `vendor`; nil when it has none.
    public func bindings(of account: AccountKey) -> AccountBindings? {
        accountTable.bindings(of: AccountKey(vendor: vendorRuleHistory.aliases.filing(account.vendor), account: account.account))
    }

    /// The accounts whose binding changes name `id` or any device merged with it, sorted; empty
    /// when the device is unknown.
    public func accounts(of id: DeviceID) -> [AccountKey] {
        guard let number = slotNumber(of: id.uuid) else { return [] }
        let root = slots[number].canonical
        let merged = [root] + (members[root] ?? [])
        return accountTable.accounts(naming: merged.map { slots[$0].id })
    }

    /// Binding changes held, all accounts together.
    public var bindingChangeCount: Int { accountTable.changeCount }

    private func record(of root: UInt32) -> DeviceRecord {
        var apps = [AppSeen]()
        let slot = slots[root]
        if slot.app != Self.noApp {
            apps.append(
                AppSeen(
                    bundle: bundles[slot.app], firstSeen: HLCTimestamp(rawValue: slot.firstSeen),
                    lastSeen: HLCTimestamp(rawValue: slot.lastSeen)))
        }
        for app in moreApps[root] ?? [] {
            apps.append(
                AppSeen(
                    bundle: bundles[app.bundle], firstSeen: HLCTimestamp(rawValue: app.firstSeen),
                    lastSeen: HLCTimestamp(rawValue: app.lastSeen)))
        }
        return DeviceRecord(
            device: ref(root), apps: apps.sorted { $0.bundle < $1.bundle },
            aliases: (members[root] ?? []).map { DeviceID(slots[$0].id) }.sorted())
    }

    // MARK: - Comparing replicas

    /// A normalised view of the whole state, equal on two replicas exactly when they hold the
    /// same content: every device's own creation and canonical device (aliases included), every
    /// canonical record, every claim's owner, and the members. For tests and convergence checks;
    /// it walks everything.
    public func snapshot() -> Snapshot {
        var devices = [DeviceID: Snapshot.Device]()
        var records = [DeviceID: DeviceRecord]()
        for number in 0..<UInt32(slots.count) {
            let slot = slots[number]
            devices[DeviceID(slot.id)] = Snapshot.Device(ref: ref(number), canonical: DeviceID(slots[slot.canonical].id))
            if slot.canonical == number { records[DeviceID(slot.id)] = record(of: number) }
        }
        var claimed = [Snapshot.Claim: DeviceID]()
        claims.forEach { key, owner in
            let identifier = Identifier(kind: IdentifierKind(rawValue: key.kind)!, value: key.value)
            claimed[Snapshot.Claim(vendor: vendors[key.vendor], identifier: identifier)] = DeviceID(slots[owner].id)
        }
        var bindings = Set<BindingChange>()
        accountTable.forEachChange { bindings.insert($0) }
        var later = Set<Snapshot.LaterIDFV>()
        for (number, entries) in laterIDFVs {
            for entry in entries { later.insert(Snapshot.LaterIDFV(device: DeviceID(slots[number].id), claim: entry.claim, appeared: entry.appeared)) }
        }
        return Snapshot(
            devices: devices, records: records, claims: claimed, members: clusterMembers, bindings: bindings,
            tombstones: Set(tombstones.map(DeviceID.init)), gone: Set(devices.keys.filter(isGone)),
            vendorRuleChanges: vendorRuleHistory.changes, clones: clones, laterIDFVs: later)
    }

    /// See ``snapshot()``.
    public struct Snapshot: Equatable, Sendable {
        /// A device as a replica holds it, canonical or not.
        public struct Device: Equatable, Sendable {
            /// Its ID, its earliest creation known (HLC and origin) and its vendor.
            public let ref: DeviceRef
            /// The winner of its merge set (itself when canonical).
            public let canonical: DeviceID
        }

        /// A (vendor, identifier) pair.
        public struct Claim: Hashable, Sendable, CustomStringConvertible {
            public let vendor: Vendor
            public let identifier: Identifier
            public var description: String { "\(vendor)/\(identifier)" }
        }

        /// Every known device.
        public let devices: [DeviceID: Device]
        /// Every canonical device's record.
        public let records: [DeviceID: DeviceRecord]
        /// Every claim to the device that owns it (which may be an alias; ``devices`` names its
        /// canonical device).
        public let claims: [Claim: DeviceID]
        /// The cluster's members.
        public let members: [NodeID: Member]
        /// Every binding change.
        public let bindings: Set<BindingChange>
        /// Every device ID a forget named.
        public let tombstones: Set<DeviceID>
        /// Every known device that is gone (its merge set holds a tombstoned device).
        public let gone: Set<DeviceID>
        /// Every change of the cluster's vendor rules.
        public let vendorRuleChanges: Set<VendorRuleChange>
        /// Every clone operation.
        public let clones: Set<CloneOp>
        /// Every later IDFV a device's keychain took (``LaterIDFV``).
        public let laterIDFVs: Set<LaterIDFV>

        /// A device's later IDFV: the device the registration named, the claim value, and when.
        public struct LaterIDFV: Hashable, Sendable {
            public let device: DeviceID
            public let claim: UUID128
            public let appeared: UInt64
        }

        /// Every known device to its canonical device.
        public var canonical: [DeviceID: DeviceID] { devices.mapValues(\.canonical) }
    }
}
