/// One piece of a ``RegistryState`` as a snapshot keeps it. A state is written as every
/// `device`, then every `alias`, every `claim` and every `app`; ``RegistryState/Restorer`` builds
/// the same state back from them, in that order. Later pieces name a device by its number: its
/// position among the `device` pieces, from 0.
///
/// The pieces are the state's own facts, not operations: replaying operations decides merges
/// again, while restoring only sets down what was decided, so a restart from a snapshot costs
/// about one index insert per device and per claim.
public enum SnapshotRecord: Hashable, Sendable {
    /// A device the state knows, canonical or not.
    case device(DeviceRef)
    /// Device `device` is an alias of canonical device `of` (one hop).
    case alias(UInt32, of: UInt32)
    /// `identifier` within `vendor` is claimed by device `owner` (which may be an alias).
    case claim(vendor: Vendor, identifier: Identifier, owner: UInt32)
    /// Canonical device `device` was seen from `bundle` between `first` and `last`.
    case app(device: UInt32, bundle: BundleID, first: HLCTimestamp, last: HLCTimestamp)
}

/// Why snapshot records could not be restored: they contradict each other or come out of order.
public struct SnapshotRestoreError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

extension RegistryState {
    /// Calls `body` with every piece of the state, in the order ``Restorer`` takes them. It reads
    /// the state as it is; the caller keeps it from changing meanwhile. Devices are numbered as
    /// the state numbers its slots, which the pieces keep.
    public func forEachSnapshotRecord(_ body: (SnapshotRecord) throws -> Void) rethrows {
        let count = UInt32(slots.count)
        for number in 0..<count { try body(.device(ref(number))) }
        for number in 0..<count where slots[number].canonical != number {
            try body(.alias(number, of: slots[number].canonical))
        }
        var claimed = [(ClaimKey, UInt32)]()
        claims.forEach { key, owner in claimed.append((key, owner)) }
        for (key, owner) in claimed {
            let identifier = Identifier(kind: IdentifierKind(rawValue: key.kind)!, value: key.value)
            try body(.claim(vendor: vendors[key.vendor], identifier: identifier, owner: owner))
        }
        for number in 0..<count where slots[number].canonical == number {
            let slot = slots[number]
            if slot.app != Self.noApp {
                try body(
                    .app(
                        device: number, bundle: bundles[slot.app], first: HLCTimestamp(rawValue: slot.firstSeen),
                        last: HLCTimestamp(rawValue: slot.lastSeen)))
            }
            for app in moreApps[number] ?? [] {
                try body(
                    .app(
                        device: number, bundle: bundles[app.bundle], first: HLCTimestamp(rawValue: app.firstSeen),
                        last: HLCTimestamp(rawValue: app.lastSeen)))
            }
        }
    }

    /// Builds a state back from snapshot records, one at a time, so that a snapshot streams
    /// from disk without being held whole.
    public struct Restorer: Sendable {
        private var state: RegistryState
        private enum Phase: Int, Comparable {
            case devices, aliases, claims, apps
            static func < (a: Phase, b: Phase) -> Bool { a.rawValue < b.rawValue }
        }
        private var phase = Phase.devices

        /// A restorer whose indexes are sized for `expectedDevices` (see ``RegistryState/init(expectedDevices:)``).
        public init(expectedDevices: Int = 0) {
            state = RegistryState(expectedDevices: expectedDevices)
        }

        public mutating func add(_ record: SnapshotRecord) throws(SnapshotRestoreError) {
            switch record {
            case .device(let ref):
                try enter(.devices, record)
                guard state.slotOf.value(for: ref.id.uuid) == nil else { throw SnapshotRestoreError("device \(ref.id) appears twice") }
                state.appendSlot(ref)
            case .alias(let member, let root):
                try enter(.aliases, record)
                try check(member)
                try check(root)
                guard member != root, state.slots[root].canonical == root, state.slots[member].canonical == member else {
                    throw SnapshotRestoreError("alias \(member) of \(root) is not one hop")
                }
                state.slots[member].canonical = root
                state.members[root, default: []].append(member)
                state.aliasCount += 1
            case .claim(let vendor, let identifier, let owner):
                try enter(.claims, record)
                guard let vendorNumber = state.vendors.number(of: vendor) else {
                    throw SnapshotRestoreError("a claim names vendor \(vendor), which no device has")
                }
                try check(owner)
                let ownerSlot = owner
                guard state.slots[ownerSlot].vendor == vendorNumber else {
                    throw SnapshotRestoreError("\(owner) claims \(identifier) in another vendor than its own")
                }
                guard state.claims.set(ClaimKey(vendor: vendorNumber, identifier: identifier), ownerSlot) == nil else {
                    throw SnapshotRestoreError("\(identifier) in \(vendor) is claimed twice")
                }
            case .app(let root, let bundle, let first, let last):
                try enter(.apps, record)
                try check(root)
                guard state.slots[root].canonical == root else { throw SnapshotRestoreError("app of alias \(root)") }
                state.see(state.bundles.intern(bundle), first: first.rawValue, last: last.rawValue, on: root)
            }
        }

        /// The state the records made.
        public func finish() -> RegistryState {
            state
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
