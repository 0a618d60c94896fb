/// One piece of a ``RegistryState`` as a snapshot keeps it. A state is written as its names
/// (every origin node, vendor and bundle, each kind numbered from 0 in the order written), then
/// every `device`, every `alias`, every `claim`, every `app`, every `binding`, every `tombstone`,
/// every `laterIDFV`, every `clone` and every `vendorRule`; ``RegistryState/Restorer``
/// builds the same state back from them, in that order. Later pieces name a device by its number
/// (its position among the `device` pieces, from 0) and a name by its number, so that restoring
/// costs about one index insert per device and per claim, with no string to parse or hash.
///
/// The pieces are the state's own facts, not operations: replaying operations decides merges
/// again, while restoring only sets down what was decided.
public enum SnapshotRecord: Hashable, Sendable {
    case origin(NodeID)
    case vendor(Vendor)
    case bundle(BundleID)
    /// A device the state knows, canonical or not, created at `created` by origin number
    /// `origin`, in vendor number `vendor`.
    case device(id: DeviceID, created: HLCTimestamp, origin: UInt32, vendor: UInt32)
    /// Device `device` is an alias of canonical device `of` (one hop).
    case alias(UInt32, of: UInt32)
    /// `identifier` within vendor number `vendor` is claimed by device `owner` (which may be an
    /// alias).
    case claim(vendor: UInt32, identifier: Identifier, owner: UInt32)
    /// Canonical device `device` was seen from bundle number `bundle` between `first` and `last`.
    case app(device: UInt32, bundle: UInt32, first: HLCTimestamp, last: HLCTimestamp)
    /// A member of the cluster (written before everything else).
    case member(NodeID, Member)
    /// A binding change of `account` in vendor number `vendor`, naming `device` (which need not be
    /// a device of the snapshot: the change may have arrived before the device's registration),
    /// accepted at `time` by origin number `origin`.
    case binding(kind: BindingChange.Kind, vendor: UInt32, account: UUID128, device: DeviceID, time: HLCTimestamp, origin: UInt32)
    /// A forget named `device` (the device need not be a device of the snapshot).
    case tombstone(DeviceID)
    /// Device `device`'s keychain took IDFV claim `claim` at `appeared` (``LaterIDFV``).
    case laterIDFV(device: UInt32, claim: UUID128, appeared: HLCTimestamp)
    /// A suspected keychain clone (``CloneOp``). Its devices and claims are in the snapshot's
    /// own records; restoring applies it again, which adds only its marks. Boxed (`indirect`),
    /// as is a vendor rule: both are rare and several times bigger than the other cases, and a
    /// record is copied a few times on its way into a snapshot's bytes.
    indirect case clone(CloneOp)
    /// A change of the cluster's vendor rules (written last).
    indirect case vendorRule(VendorRuleChange)
}

/// Why snapshot records could not be restored: they contradict each other or come out of order.
public struct SnapshotRestoreError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

extension RegistryState {
    /// Every claim, in the claim index's order: as `walk` (the index's `forEach`, or a forked
    /// child's drain) finds them, one pass. A ``Restorer`` whose index has the same seed (see
    /// ``init(expectedDevices:claimSeed:tables:)``) then writes its buckets front to back, and
    /// reads each claim's owner slot in runs it asks for ahead (docs/performance.md, "Claims in
    /// the claim index's order").
    private func claimsInIndexOrder(placing walk: ((ClaimKey, UInt32) -> Void) -> Void) -> [(ClaimKey, UInt32)] {
        let count = claims.count
        return [(ClaimKey, UInt32)](unsafeUninitializedCapacity: count) { ordered, initialized in
            var placed = 0
            walk { key, owner in
                precondition(placed < count, "the index holds more claims than it counts")
                (ordered.baseAddress! + placed).initialize(to: (key, owner))
                placed += 1
            }
            precondition(placed == count, "the index holds fewer claims than it counts")
            initialized = count
        }
    }

    /// Calls `body` with every piece of the state, in the order ``Restorer`` takes them. It reads
    /// the state as it is; the caller keeps it from changing meanwhile. Devices are numbered as
    /// the state numbers its slots, which the pieces keep.
    public func forEachSnapshotRecord(_ body: (SnapshotRecord) throws -> Void) rethrows {
        try forEachSnapshotRecord(claimsInOrder: claimsInIndexOrder(placing: claims.forEach), body)
    }

    /// In a forked child that writes this state out: gives up the child's copy of the device
    /// index, which the records do not need (``forEachSnapshotRecordInForkedChild(afterReadingIndexes:_:)``
    /// does it too; a child calls this first to let go of it sooner).
    public func dropDeviceIndexInForkedChild() {
        slotOf.dropPagesInForkedChild()
    }

    /// ``forEachSnapshotRecord(_:)`` in a forked child that writes this state out (RegistryServer's
    /// `ForkedSnapshot`): until the child lets go of a page of the indexes, every write of the
    /// serving node to it is a copy under the engine's lock, and the node writes them at random.
    /// So the device index, which the records do not need, is let go of at once, and the claim
    /// index as it is copied out in its order,
    /// before any record is written; then `afterReadingIndexes` is
    /// called (the child tells the node, which then stops holding its new claims aside, see
    /// ``holdNewClaims(until:)``). This state must not be used again in the child.
    public func forEachSnapshotRecordInForkedChild(afterReadingIndexes: () -> Void, _ body: (SnapshotRecord) throws -> Void) rethrows {
        slotOf.dropPagesInForkedChild()
        let ordered = claimsInIndexOrder(placing: claims.drainInForkedChild)
        afterReadingIndexes()
        try forEachSnapshotRecord(claimsInOrder: ordered, body)
    }

    /// For a forked snapshot, just before the fork: until `childLetGo` returns true (the child has
    /// read the claim index and let go of its pages), claims new to the index go into a table of
    /// their own, so that the node writes none of the claim table's pages the child shares
    /// (``HoldableIndex``). Then they move into the claim index a few at a time, one at each
    /// claim added. `childLetGo` is asked at each claim added, so it must be cheap.
    public mutating func holdNewClaims(until childLetGo: @escaping @Sendable () -> Bool) {
        claims.hold(until: childLetGo)
    }

    /// Ends ``holdNewClaims(until:)`` now: the fork failed.
    public mutating func releaseHeldClaims() {
        claims.release()
    }

    /// True while claims are held aside (``holdNewClaims(until:)``), or moving back.
    public var holdsClaimsAside: Bool { claims.holdsEntries }

    private func forEachSnapshotRecord(claimsInOrder: [(ClaimKey, UInt32)], _ body: (SnapshotRecord) throws -> Void) rethrows {
        for (node, member) in clusterMembers.sorted(by: { $0.key < $1.key }) { try body(.member(node, member)) }
        for number in 0..<UInt32(origins.count) { try body(.origin(origins[number])) }
        for number in 0..<UInt32(vendors.count) { try body(.vendor(vendors[number])) }
        for number in 0..<UInt32(bundles.count) { try body(.bundle(bundles[number])) }
        let count = UInt32(slots.count)
        for number in 0..<count {
            let slot = slots[number]
            try body(.device(id: DeviceID(slot.id), created: HLCTimestamp(rawValue: slot.created), origin: slot.origin, vendor: slot.vendor))
        }
        for number in 0..<count where slots[number].canonical != number {
            try body(.alias(number, of: slots[number].canonical))
        }
        for (key, owner) in claimsInOrder {
            let identifier = Identifier(kind: IdentifierKind(rawValue: key.kind)!, value: key.value)
            try body(.claim(vendor: key.vendor, identifier: identifier, owner: owner))
        }
        for number in 0..<count where slots[number].canonical == number {
            let slot = slots[number]
            if slot.app != Self.noApp {
                try body(
                    .app(
                        device: number, bundle: slot.app, first: HLCTimestamp(rawValue: slot.firstSeen),
                        last: HLCTimestamp(rawValue: slot.lastSeen)))
            }
            for app in moreApps[number] ?? [] {
                try body(
                    .app(
                        device: number, bundle: app.bundle, first: HLCTimestamp(rawValue: app.firstSeen),
                        last: HLCTimestamp(rawValue: app.lastSeen)))
            }
        }
        try accountTable.forEachChange { change in
            try body(
                .binding(
                    kind: change.kind, vendor: vendors.number(of: change.vendor)!, account: change.account, device: change.device,
                    time: change.time, origin: origins.number(of: change.origin)!))
        }
        for device in tombstones.sorted() { try body(.tombstone(DeviceID(device))) }
        for (device, entries) in laterIDFVs.sorted(by: { $0.key < $1.key }) {
            for entry in entries { try body(.laterIDFV(device: device, claim: entry.claim, appeared: HLCTimestamp(rawValue: entry.appeared))) }
        }
        for op in clones.sorted(by: { ($0.earlierSeen, $0.device.id, $0.laterIDFV.value) < ($1.earlierSeen, $1.device.id, $1.laterIDFV.value) }) {
            try body(.clone(op))
        }
        let changes = vendorRuleHistory.changes.sorted { $0.isEarlier(than: $1) }
        for change in changes { try body(.vendorRule(change)) }
    }

    /// Builds a state back from snapshot records, one at a time, so that a snapshot streams
    /// from disk without being held whole.
    public struct Restorer: Sendable {
        private var state: RegistryState
        private enum Phase: Int, Comparable {
            case names, devices, aliases, claims, apps, bindings, tombstones, laterIDFVs, clones, vendorRules
            static func < (a: Phase, b: Phase) -> Bool { a.rawValue < b.rawValue }
        }
        private var phase = Phase.names
        /// A `device` record's fields (see ``addDevice(_:)``).
        public struct Device: Sendable {
            let id: DeviceID
            let created: HLCTimestamp
            let origin: UInt32
            let vendor: UInt32

            public init(id: DeviceID, created: HLCTimestamp, origin: UInt32, vendor: UInt32) {
                (self.id, self.created, self.origin, self.vendor) = (id, created, origin, vendor)
            }
        }

        /// A `claim` record's fields (see ``addClaim(_:)``).
        public struct Claim: Sendable {
            let vendor: UInt32
            let identifier: Identifier
            let owner: UInt32

            public init(vendor: UInt32, identifier: Identifier, owner: UInt32) {
                (self.vendor, self.identifier, self.owner) = (vendor, identifier, owner)
            }
        }

        /// Devices and claims waiting to go into the indexes, a run at a time: the indexes are far
        /// bigger than the CPU's caches, so each insert is a cache miss, and asking for a run's
        /// buckets first in a tight loop lets the misses overlap (see ``RegistryState/warm(for:newDevices:)``;
        /// BENCHMARKS.md has the restart it buys).
        private var pendingDevices: [Device] = []
        private var pendingClaims: [Claim] = []
        private static let runLength = 1_024
        /// What warming read: no meaning, kept so that the compiler cannot drop the reads.
        public private(set) var warmth: UInt32 = 0

        /// A restorer whose indexes are sized for `expectedDevices`, from `tables`, the claim
        /// index seeded with `claimSeed` (see ``RegistryState/init(expectedDevices:claimSeed:tables:)``).
        public init(expectedDevices: Int = 0, claimSeed: UInt64? = nil, tables: any TableAllocator = HeapTableAllocator()) {
            state = RegistryState(expectedDevices: expectedDevices, claimSeed: claimSeed, tables: tables)
            pendingDevices.reserveCapacity(Self.runLength)
            pendingClaims.reserveCapacity(Self.runLength)
        }

        public mutating func add(_ record: SnapshotRecord) throws(SnapshotRestoreError) {
            switch record {
            case .device(let id, let created, let origin, let vendor):
                try addDevice(Device(id: id, created: created, origin: origin, vendor: vendor))
            case .claim(let vendor, let identifier, let owner):
                try addClaim(Claim(vendor: vendor, identifier: identifier, owner: owner))
            default:
                try flush()
                try apply(record)
            }
        }

        /// ``add(_:)`` of a `device` record, for a caller that has its fields: the bulk of a
        /// snapshot, which then need not be copied as ``SnapshotRecord``s.
        public mutating func addDevice(_ device: Device) throws(SnapshotRestoreError) {
            if phase != .devices {
                try enter(.devices, .device(id: device.id, created: device.created, origin: device.origin, vendor: device.vendor))
            }
            pendingDevices.append(device)
            if pendingDevices.count == Self.runLength { try flush() }
        }

        /// ``add(_:)`` of a `claim` record, for a caller that has its fields (see
        /// ``addDevice(_:)``).
        public mutating func addClaim(_ claim: Claim) throws(SnapshotRestoreError) {
            if phase != .claims {
                try enter(.claims, .claim(vendor: claim.vendor, identifier: claim.identifier, owner: claim.owner))
                try flushDevices()  // the last devices, if any
            }
            pendingClaims.append(claim)
            if pendingClaims.count == Self.runLength { try flushClaims() }
        }

        /// Applies the pending runs, their index buckets asked for first. That is skipped while
        /// an index moves entries into a bigger table (an index that was not sized for the
        /// snapshot): done then, it corrupted memory in tests, for a cause not yet found.
        private mutating func flush() throws(SnapshotRestoreError) {
            try flushDevices()
            try flushClaims()
        }

        private mutating func flushDevices() throws(SnapshotRestoreError) {
            if !pendingDevices.isEmpty {
                if !state.slotOf.isMovingEntries { warmth = warmth &+ state.slotOf.touch(pendingDevices.map { $0.id.uuid }) }
                for device in pendingDevices {
                    try insertDevice(id: device.id, created: device.created, origin: device.origin, vendor: device.vendor)
                }
                pendingDevices.removeAll(keepingCapacity: true)
            }
        }

        private mutating func flushClaims() throws(SnapshotRestoreError) {
            guard !pendingClaims.isEmpty else { return }
            var keys = [ClaimKey]()
            keys.reserveCapacity(pendingClaims.count)
            for claim in pendingClaims where claim.vendor < 1 << 28 { keys.append(ClaimKey(vendor: claim.vendor, identifier: claim.identifier)) }
            if !state.claims.isMovingEntries { warmth = warmth &+ state.claims.touch(keys) }
            // Each claim reads its owner's slot (its vendor and its ID, which may sit in two cache
            // lines); claims in the index's order name owners at random, so their slots are read
            // here first, the misses overlapping.
            let slotCount = UInt32(state.slots.count)
            for claim in pendingClaims where claim.owner < slotCount {
                let slot = state.slots[claim.owner]
                warmth = warmth &+ slot.vendor &+ UInt32(truncatingIfNeeded: slot.id.high)
            }
            for claim in pendingClaims { try insertClaim(vendor: claim.vendor, identifier: claim.identifier, owner: claim.owner) }
            pendingClaims.removeAll(keepingCapacity: true)
        }

        private mutating func insertDevice(id: DeviceID, created: HLCTimestamp, origin: UInt32, vendor: UInt32) throws(SnapshotRestoreError) {
            guard origin < state.origins.count, vendor < state.vendors.count else {
                throw SnapshotRestoreError("device \(id) names an origin or vendor the snapshot does not")
            }
            let number = UInt32(state.slots.count)
            guard state.slotNumber(of: id.uuid) == nil else { throw SnapshotRestoreError("device \(id) appears twice") }
            state.slots.append(
                Slot(
                    id: id.uuid, created: created.rawValue, origin: origin, vendor: vendor, canonical: number, app: RegistryState.noApp,
                    firstSeen: 0, lastSeen: 0))
            state.slotOf.insert(id.uuid, slot: number)
            state.digest &+= state.deviceFact(number)
        }

        private mutating func insertClaim(vendor: UInt32, identifier: Identifier, owner: UInt32) throws(SnapshotRestoreError) {
            try check(owner)
            guard state.slots[owner].vendor == vendor else {
                throw SnapshotRestoreError("device \(owner) claims \(identifier) in another vendor than its own")
            }
            let key = ClaimKey(vendor: vendor, identifier: identifier)
            guard state.claims.set(key, owner) == nil else {
                throw SnapshotRestoreError("\(identifier) in vendor \(vendor) is claimed twice")
            }
            state.digest &+= state.claimFact(key, owner: owner)
        }

        private mutating func apply(_ record: SnapshotRecord) throws(SnapshotRestoreError) {
            switch record {
            case .origin(let origin):
                try enter(.names, record)
                let expected = UInt32(state.origins.count)
                guard state.origins.intern(origin) == expected else { throw SnapshotRestoreError("origin \(origin) is named twice") }
            case .vendor(let vendor):
                try enter(.names, record)
                let expected = UInt32(state.vendors.count)
                guard state.vendors.intern(vendor) == expected else { throw SnapshotRestoreError("vendor \(vendor) is named twice") }
            case .bundle(let bundle):
                try enter(.names, record)
                let expected = UInt32(state.bundles.count)
                guard state.bundles.intern(bundle) == expected else { throw SnapshotRestoreError("bundle \(bundle) is named twice") }
            case .alias(let member, let root):
                try enter(.aliases, record)
                try check(member)
                try check(root)
                // One hop: the root is a head, and the member is a head with no aliases of its
                // own (else they would be two hops from the root).
                guard member != root, state.slots[root].canonical == root, state.slots[member].canonical == member,
                    state.members[member] == nil
                else {
                    throw SnapshotRestoreError("alias \(member) of \(root) is not one hop")
                }
                // The set's head is its winner by the merge rule. (Its vendor may differ from a
                // member's: a replica that has not heard of a move yet merges the device of a
                // registration filed under the joined vendor with its own, still filed under the
                // old one.)
                guard state.wins(root, over: member) else {
                    throw SnapshotRestoreError("alias \(member) of \(root) would win their merge: the head of a merged set is its winner")
                }
                state.digest &-= state.deviceFact(member)
                state.slots[member].canonical = root
                state.digest &+= state.deviceFact(member)
                state.members[root, default: []].append(member)
                state.aliasCount += 1
            case .member(let node, let member):
                try enter(.names, record)
                guard state.clusterMembers.updateValue(member, forKey: node) == nil else {
                    throw SnapshotRestoreError("member \(node) appears twice")
                }
                state.digest &+= StateDigest.member(node, member)
                state.membershipChanges &+= 1
            case .device, .claim:
                preconditionFailure("devices and claims go through add(_:)")
            case .app(let root, let bundle, let first, let last):
                try enter(.apps, record)
                try check(root)
                guard bundle < state.bundles.count else { throw SnapshotRestoreError("an app names bundle \(bundle), which the snapshot does not") }
                guard state.slots[root].canonical == root else { throw SnapshotRestoreError("app of alias \(root)") }
                state.see(bundle, first: first.rawValue, last: last.rawValue, on: root)
            case .binding(let kind, let vendor, let account, let device, let time, let origin):
                try enter(.bindings, record)
                guard vendor < state.vendors.count, origin < state.origins.count else {
                    throw SnapshotRestoreError("a binding names a vendor or origin the snapshot does not")
                }
                let change = BindingChange(
                    kind: kind, vendor: state.vendors[vendor], account: account, device: device, time: time, origin: state.origins[origin])
                guard state.accountTable.insert(change) else { throw SnapshotRestoreError("binding change \(change) appears twice") }
                state.digest &+= state.bindingFact(change, vendor: vendor, origin: origin)
            case .tombstone(let device):
                try enter(.tombstones, record)
                guard state.tombstones.insert(device.uuid).inserted else { throw SnapshotRestoreError("tombstone \(device) appears twice") }
                state.digest &+= StateDigest.tombstone(device.uuid)
                // A snapshot holds no apps or bindings of a gone set; burying checks nothing
                // more is held, whatever wrote it.
                if let number = state.slotNumber(of: device.uuid) { state.bury(state.slots[number].canonical) }
            case .laterIDFV(let device, let claim, let appeared):
                try enter(.laterIDFVs, record)
                try check(device)
                guard !(state.laterIDFVs[device]?.contains { $0.claim == claim } ?? false) else {
                    throw SnapshotRestoreError("later IDFV \(claim) of device \(device) appears twice")
                }
                state.noteLaterIDFV(claim, appeared: appeared.rawValue, on: device)
            case .clone(let op):
                try enter(.clones, record)
                guard !state.clones.contains(op) else { throw SnapshotRestoreError("clone \(op.key) appears twice") }
                guard state.slotNumber(of: op.device.id.uuid) != nil, op.newDevice.map({ state.slotNumber(of: $0.id.uuid) != nil }) ?? true else {
                    throw SnapshotRestoreError("clone \(op.key) names a device the snapshot does not hold")
                }
                state.apply(op)
            case .vendorRule(let change):
                try enter(.vendorRules, record)
                // A snapshot's devices are filed under the vendors its moves left (see finish()).
                guard state.hold(change) else { throw SnapshotRestoreError("vendor rule change \(change) appears twice") }
            }
        }

        /// The state the records made.
        public mutating func finish() throws(SnapshotRestoreError) -> RegistryState {
            try flush()
            // Finds nothing to file when the snapshot was written by a replica that filed it;
            // walks the state once, and only when some move joined vendors.
            state.fileUnderAliases()
            state.indexClones()
            // A snapshot keeps no forget's vendor: a tombstone whose device it does not hold
            // holds back every vendor's new devices until that device arrives.
            for device in state.tombstones where state.slotNumber(of: device) == nil {
                state.forgottenNotReceived.updateValue(nil, forKey: device)
            }
            return state
        }

        private mutating func enter(_ next: Phase, _ record: SnapshotRecord) throws(SnapshotRestoreError) {
            guard next >= phase else { throw SnapshotRestoreError("\(record) comes after the \(phase) records") }
            phase = next
        }

        private func check(_ number: UInt32) throws(SnapshotRestoreError) {
            guard number < state.slots.count else { throw SnapshotRestoreError("device \(number) is no device of the snapshot") }
        }
    }
}
