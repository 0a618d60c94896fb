import RegistryCore

/// What every replica must hold once every operation has reached it, worked out from the
/// operations alone, apart from `RegistryState`: devices are merged when they claimed the same
/// identifier in one vendor or one operation names them merged, and each merge set's canonical
/// device is its minimum by (earliest created HLC, origin node bytes, device ID bytes), compared as
/// plain tuples. Each claim is owned by the claimant whose ID's bytes come first, each device
/// keeps its earliest creation, and each merge set's apps span their earliest and latest
/// sightings. A merge set is gone when it holds a device a forget named, and then keeps no apps.
/// Vendors that moves joined are one: every claim is keyed by the name `aliases` (from
/// ``VendorRuleOracle/aliases(_:)``) gives its vendor. A clone operation names its device, and a
/// split creates its new device, which claims the split IDFV's successor claim (its claim at
/// generation `UInt32.max`, docs/identity.md).
public struct ExpectedCanonical {
    public private(set) var canonical: [UUID128: UUID128] = [:]
    /// Every device to its earliest creation: (HLC, origin).
    public private(set) var creation: [UUID128: (created: UInt64, origin: String)] = [:]
    /// Every claim ("vendor/kind/uuid") to the device that owns it.
    public private(set) var owner: [String: UUID128] = [:]
    /// Every canonical device to its apps: bundle text to the earliest and latest sightings
    /// (HLCs) among the operations of its whole merge set.
    public private(set) var apps: [UUID128: [String: (first: UInt64, last: UInt64)]] = [:]
    /// Every device ID a forget named.
    public private(set) var tombstones: Set<UUID128> = []
    /// Every known device whose merge set holds a tombstoned device.
    public private(set) var gone: Set<UUID128> = []

    public init(_ operations: [LoggedOperation], aliases: [String: String] = [:]) {
        var rank = [UUID128: (UInt64, [UInt8], UUID128)]()
        var parent = [UUID128: UUID128]()
        func find(_ id: UUID128) -> UUID128 {
            var id = id
            while let next = parent[id], next != id { id = next }
            return id
        }
        func note(_ ref: DeviceRef) {
            let candidate = (ref.created.rawValue, Array(ref.origin.value.utf8), ref.id.uuid)
            if let known = rank[ref.id.uuid], !Self.less(candidate, known) { return }
            rank[ref.id.uuid] = candidate
            if parent[ref.id.uuid] == nil { parent[ref.id.uuid] = ref.id.uuid }
        }
        func connect(_ a: UUID128, _ b: UUID128) {
            let (rootA, rootB) = (find(a), find(b))
            if rootA != rootB { parent[rootA] = rootB }
        }
        var claimants = [String: UUID128]()
        var sightings = [(device: UUID128, bundle: String, seen: UInt64)]()
        for logged in operations {
            if case .forget(let op) = logged.operation { tombstones.insert(op.device.uuid) }
            if case .clone(let op) = logged.operation {
                note(op.device)
                guard let newDevice = op.newDevice else { continue }
                note(newDevice)
                let vendor = Vendor(trusted: aliases[op.device.vendor.name] ?? op.device.vendor.name)
                let key = Self.key(vendor: vendor, identifier: op.laterIDFV.atGeneration(.max))
                if let first = claimants[key] { connect(first, newDevice.id.uuid) } else { claimants[key] = newDevice.id.uuid }
                if let known = owner[key], !Self.bytes(newDevice.id.uuid).lexicographicallyPrecedes(Self.bytes(known)) { continue }
                owner[key] = newDevice.id.uuid
                continue
            }
            guard case .registration(let op) = logged.operation else { continue }
            note(op.device)
            sightings.append((op.device.id.uuid, op.bundle.value, op.seen.rawValue))
            for identifier in op.claims {
                let key = Self.key(vendor: Vendor(trusted: aliases[op.device.vendor.name] ?? op.device.vendor.name), identifier: identifier)
                if let first = claimants[key] { connect(first, op.device.id.uuid) } else { claimants[key] = op.device.id.uuid }
                let id = op.device.id.uuid
                if let known = owner[key], !Self.bytes(id).lexicographicallyPrecedes(Self.bytes(known)) { continue }
                owner[key] = id
            }
            for other in op.merged {
                note(other)
                connect(op.device.id.uuid, other.id.uuid)
            }
        }
        var best = [UUID128: UUID128]()
        for id in parent.keys {
            let root = find(id)
            if let current = best[root], !Self.less(rank[id]!, rank[current]!) { continue }
            best[root] = id
        }
        for id in parent.keys { canonical[id] = best[find(id)]! }
        let goneRoots = Set(tombstones.filter { parent[$0] != nil }.map(find))
        gone = Set(parent.keys.filter { goneRoots.contains(find($0)) })
        for (id, (created, origin, _)) in rank { creation[id] = (created, String(decoding: origin, as: UTF8.self)) }
        for sighting in sightings where !gone.contains(sighting.device) {
            let root = canonical[sighting.device]!
            let known = apps[root]?[sighting.bundle]
            apps[root, default: [:]][sighting.bundle] = (min(known?.first ?? .max, sighting.seen), max(known?.last ?? 0, sighting.seen))
        }
    }

    /// The key ``owner`` names a claim by.
    public static func key(vendor: Vendor, identifier: Identifier) -> String {
        "\(vendor.name)/\(identifier.kind.rawValue)/\(identifier.value.text)"
    }

    private static func bytes(_ id: UUID128) -> [UInt8] {
        (0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? id.high : id.low) >> (56 - 8 * ($0 % 8))) }
    }

    private static func less(_ a: (UInt64, [UInt8], UUID128), _ b: (UInt64, [UInt8], UUID128)) -> Bool {
        if a.0 != b.0 { return a.0 < b.0 }
        if a.1 != b.1 { return a.1.lexicographicallyPrecedes(b.1) }
        return a.2 < b.2
    }
}
