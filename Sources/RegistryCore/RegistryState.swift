/// Every device, claim and alias a node knows, as a plain value with no I/O.
///
/// The state is a join of operations: claims are a union, devices found to be one are merged by
/// union-find whose root is always the winner the written rule names, and app sightings keep the
/// earliest first-seen and latest last-seen. Applying the same set of operations in any order,
/// any number of times, gives the same state.
public struct RegistryState: Sendable {
    struct Entry: Sendable {
        let ref: DeviceRef
        /// The winner of this device's merge set; itself when canonical. Always one hop.
        var canonical: DeviceID
        /// On a canonical entry only: every device merged into it.
        var aliases: [DeviceID]
        /// On a canonical entry only.
        var apps: [AppSeen]
    }

    struct ClaimKey: Hashable, Sendable {
        let vendor: Vendor
        let identifier: Identifier
    }

    private var entries: [DeviceID: Entry] = [:]
    /// Identifier to the device that claimed it (the merge-rule minimum when several did).
    private var claims: [ClaimKey: DeviceID] = [:]
    public private(set) var aliasCount = 0

    public init() {}

    /// Canonical devices.
    public var deviceCount: Int { entries.count - aliasCount }
    /// (vendor, identifier) claims.
    public var claimCount: Int { claims.count }

    // MARK: - Register

    /// Decides what registering `registration` at `now` changes, applies it, and returns the
    /// operation to log with the outcome to answer. `mint` is called only when a device is created.
    public mutating func register(
        _ registration: Registration, at now: HLCTimestamp, origin: NodeID, mint: () -> DeviceID
    ) -> (operation: RegistrationOp, outcome: RegistrationOutcome) {
        let vendor = registration.vendor
        var owners = [DeviceID]()
        var roots = [DeviceID]()
        var unclaimed = [Identifier]()
        for identifier in registration.identifiers {
            guard let owner = claims[ClaimKey(vendor: vendor, identifier: identifier)] else {
                unclaimed.append(identifier)
                continue
            }
            if !owners.contains(owner) { owners.append(owner) }
            let root = entries[owner]!.canonical
            if !roots.contains(root) { roots.append(root) }
        }

        let operation: RegistrationOp
        if roots.isEmpty {
            let ref = DeviceRef(id: mint(), created: now, origin: origin, vendor: vendor)
            operation = RegistrationOp(
                device: ref, bundle: registration.bundle, claims: registration.identifiers, merged: [], seen: now)
        } else {
            let refs = roots.map { entries[$0]!.ref }
            let winner = refs.dropFirst().reduce(refs[0]) { $1.winsMerge(against: $0) ? $1 : $0 }
            operation = RegistrationOp(
                device: winner, bundle: registration.bundle, claims: unclaimed,
                merged: refs.filter { $0.id != winner.id }, seen: now)
        }
        apply(operation)

        let canonical = entries[operation.device.id]!.canonical
        let outcome = RegistrationOutcome(
            device: canonical, created: roots.isEmpty, vendor: vendor,
            replaced: owners.filter { $0 != canonical }.sorted(), rejected: registration.rejected)
        return (operation, outcome)
    }

    // MARK: - Apply (the join)

    public mutating func apply(_ operation: Operation) {
        switch operation {
        case .registration(let op): apply(op)
        }
    }

    public mutating func apply(_ op: RegistrationOp) {
        let device = op.device
        insertIfAbsent(device)
        for identifier in op.claims {
            let key = ClaimKey(vendor: device.vendor, identifier: identifier)
            guard let owner = claims[key] else {
                claims[key] = device.id
                continue
            }
            guard owner != device.id else { continue }
            if device.winsMerge(against: entries[owner]!.ref) { claims[key] = device.id }
            union(owner, device.id)
        }
        for other in op.merged where other.vendor == device.vendor {
            insertIfAbsent(other)
            union(other.id, device.id)
        }
        let root = entries[device.id]!.canonical
        if let index = entries[root]!.apps.firstIndex(where: { $0.bundle == op.bundle }) {
            entries[root]!.apps[index].absorb(firstSeen: op.seen, lastSeen: op.seen)
        } else {
            entries[root]!.apps.append(AppSeen(bundle: op.bundle, firstSeen: op.seen, lastSeen: op.seen))
        }
    }

    private mutating func insertIfAbsent(_ ref: DeviceRef) {
        if entries[ref.id] == nil {
            entries[ref.id] = Entry(ref: ref, canonical: ref.id, aliases: [], apps: [])
        }
    }

    /// Merges the sets of `a` and `b` under the rule's winner, keeping every alias one hop deep.
    private mutating func union(_ a: DeviceID, _ b: DeviceID) {
        let rootA = entries[a]!.canonical
        let rootB = entries[b]!.canonical
        guard rootA != rootB else { return }
        let aWins = entries[rootA]!.ref.winsMerge(against: entries[rootB]!.ref)
        let (winner, loser) = aWins ? (rootA, rootB) : (rootB, rootA)
        let losing = entries[loser]!
        entries[loser]!.aliases = []
        entries[loser]!.apps = []
        let moved = [loser] + losing.aliases
        for id in moved { entries[id]!.canonical = winner }
        entries[winner]!.aliases.append(contentsOf: moved)
        for app in losing.apps {
            if let index = entries[winner]!.apps.firstIndex(where: { $0.bundle == app.bundle }) {
                entries[winner]!.apps[index].absorb(firstSeen: app.firstSeen, lastSeen: app.lastSeen)
            } else {
                entries[winner]!.apps.append(app)
            }
        }
        aliasCount += 1
    }

    // MARK: - Queries

    /// The canonical device of `id`, which may be an alias; nil when unknown.
    public func canonical(of id: DeviceID) -> DeviceID? {
        entries[id]?.canonical
    }

    /// The canonical record of `id`, which may be an alias.
    public func resolve(_ id: DeviceID) -> DeviceRecord? {
        guard let root = entries[id]?.canonical, let entry = entries[root] else { return nil }
        return DeviceRecord(
            device: entry.ref, apps: entry.apps.sorted { $0.bundle < $1.bundle }, aliases: entry.aliases.sorted())
    }

    /// The canonical record of the device `identifier` is claimed by within `vendor`.
    public func lookup(vendor: Vendor, identifier: Identifier) -> DeviceRecord? {
        guard let owner = claims[ClaimKey(vendor: vendor, identifier: identifier)] else { return nil }
        return resolve(owner)
    }

    // MARK: - Comparing replicas

    /// A normalised view of the whole state, equal on two replicas exactly when they hold the
    /// same canonical state. For tests and convergence checks; it walks everything.
    public func snapshot() -> Snapshot {
        var canonical = [DeviceID: DeviceID]()
        var records = [DeviceID: DeviceRecord]()
        for (id, entry) in entries {
            canonical[id] = entry.canonical
            if entry.canonical == id { records[id] = resolve(id) }
        }
        var claimed = [String: DeviceID]()
        for (key, owner) in claims {
            claimed["\(key.vendor)/\(key.identifier)"] = entries[owner]!.canonical
        }
        return Snapshot(canonical: canonical, records: records, claims: claimed)
    }

    /// See ``snapshot()``.
    public struct Snapshot: Equatable, Sendable {
        /// Every known device to its canonical device.
        public let canonical: [DeviceID: DeviceID]
        /// Every canonical device's record.
        public let records: [DeviceID: DeviceRecord]
        /// "vendor/kind=uuid" to the canonical device it resolves to.
        public let claims: [String: DeviceID]
    }
}
