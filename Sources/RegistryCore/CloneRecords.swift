/// An IDFV that a device's keychain UUID took after the device was created: a registration
/// presented the keychain UUID with an IDFV the vendor had not seen. Kept for the device slot the
/// registration named, whatever merges follow, as a keyed-hash claim value.
struct LaterIDFV: Hashable, Sendable {
    let claim: UUID128
    /// The earliest registration that claimed it (raw HLC).
    var appeared: UInt64
}

extension RegistryState {
    /// Records that slot `device` took later IDFV `claim` at `appeared`; the earliest such
    /// registration counts, so the record does not depend on the order registrations arrive in.
    /// A gone set keeps none (``forgetCloneEvidence(of:)``).
    mutating func noteLaterIDFV(_ claim: UUID128, appeared: UInt64, on device: UInt32) {
        if !goneRoots.isEmpty, goneRoots.contains(slots[device].canonical) {
            goneArrivals += 1
            return
        }
        if let index = laterIDFVs[device]?.firstIndex(where: { $0.claim == claim }) {
            laterIDFVs[device]![index].appeared = min(laterIDFVs[device]![index].appeared, appeared)
        } else {
            laterIDFVs[device, default: []].append(LaterIDFV(claim: claim, appeared: appeared))
        }
    }

    /// Adds a clone operation; one held already changes nothing. A split contests the keychain
    /// claim, moves the later IDFV's claim to its successor and creates the device that holds it.
    /// A mark of a gone device is not kept (``forgetCloneEvidence(of:)``).
    public mutating func apply(_ op: CloneOp) {
        if op.action != .split, isGone(op.device.id) {
            goneArrivals += 1
            return
        }
        guard clones.insert(op).inserted else { return }
        digest &+= StateDigest.clone(op)
        cloneKeys.insert(op.key)
        let device = slot(for: op.device)
        var fresh: UInt32?
        if let newDevice = op.newDevice {
            index(split: op, vendor: slots[device].vendor)
            let number = slot(for: newDevice)
            claim(ClaimKey(vendor: slots[number].vendor, identifier: op.successorClaim), for: number)
            fresh = number
        }
        if feedRecording != nil, !isGone(op.device.id) {
            let root = slots[device].canonical
            let vendor = vendors[slots[root].vendor]
            if let fresh {
                record(.split(device: DeviceID(slots[root].id), newDevice: DeviceID(slots[slots[fresh].canonical].id), vendor: vendor))
            } else {
                record(.cloneSuspected(device: DeviceID(slots[root].id), vendor: vendor))
            }
        }
    }

    /// Drops what the slots of a gone set showed of clones: the later IDFVs they took and the
    /// marks that name them, as a forget drops its app sightings. A split stays: it made a device
    /// of its own and moved the later IDFV's claim to it, which every replica must agree on. The
    /// same holds whichever order the forget and the evidence arrive in: evidence of a gone set is
    /// not taken (``noteLaterIDFV(_:appeared:on:)``, ``apply(_:)-(CloneOp)``).
    mutating func forgetCloneEvidence(of set: [UInt32]) {
        for number in set { laterIDFVs.removeValue(forKey: number) }
        guard !clones.isEmpty else { return }
        let ids = Set(set.map { slots[$0].id })
        let dropped = clones.filter { $0.action != .split && ids.contains($0.device.id.uuid) }
        guard !dropped.isEmpty else { return }
        for op in dropped {
            clones.remove(op)
            digest &-= StateDigest.clone(op)
        }
        cloneKeys = Set(clones.map(\.key))
    }

    private mutating func index(split op: CloneOp, vendor: UInt32) {
        guard let keychain = op.keychain else { return }
        contestedClaims.insert(ClaimKey(vendor: vendor, identifier: keychain))
        splitClaims.insert(ClaimKey(vendor: vendor, identifier: op.laterIDFV))
    }

    /// Builds the split indexes again from the splits held, under the vendors their devices are
    /// filed in now (after a vendor move, or a snapshot restore).
    mutating func indexClones() {
        contestedClaims.removeAll()
        splitClaims.removeAll()
        for op in clones where op.action == .split {
            guard let number = slotNumber(of: op.device.id.uuid) else { continue }
            index(split: op, vendor: slots[number].vendor)
        }
    }

    /// Whether the device `op` registered took a later IDFV (it, or a device merged with it):
    /// when not, the registration shows no clone, and
    /// ``suspectedClone(of:decided:policy:at:origin:key:)`` need not be asked. An emptiness check
    /// while no device took one; after the first, a probe of the device index and a dictionary
    /// read or two per registration.
    public func mayShowClone(after op: RegistrationOp) -> Bool {
        guard !laterIDFVs.isEmpty, let number = slotNumber(of: op.device.id.uuid) else { return false }
        let root = slots[number].canonical
        return laterIDFVs[root] != nil || (members[root] ?? []).contains { laterIDFVs[$0] != nil }
    }

    /// The suspected clones held, each with its device's canonical record now; gone devices are
    /// left out. Sorted by when the evidence was seen. `vendor` nil: every vendor.
    public func suspectedClones(in vendor: Vendor? = nil) -> [SuspectedClone] {
        let filed = vendor.map { vendorRuleHistory.aliases.filing($0) }
        // Two nodes may mark one clone at once, even naming two devices merged since: one entry
        // per (device now, later IDFV), the split if any, else the earliest evidence.
        var chosen = [CloneKey: CloneOp]()
        for op in clones {
            guard let number = slotNumber(of: op.device.id.uuid), !isGone(op.device.id) else { continue }
            let root = slots[number].canonical
            if let filed, vendors[slots[root].vendor] != filed { continue }
            let key = CloneKey(device: slots[root].id, laterIDFV: op.laterIDFV.value)
            if let held = chosen[key], !Self.preferred(op, over: held) { continue }
            chosen[key] = op
        }
        var found = [SuspectedClone]()
        for (key, op) in chosen {
            let root = slotNumber(of: key.device)!
            // A split's new device, unless it was forgotten since.
            let split = op.newDevice.flatMap { slotNumber(of: $0.id.uuid) }.map { DeviceID(slots[slots[$0].canonical].id) }
            found.append(
                SuspectedClone(
                    operation: op, device: DeviceID(key.device), vendor: vendors[slots[root].vendor],
                    splitDevice: split.flatMap { isGone($0) ? nil : $0 }))
        }
        return found.sorted { Self.preferred($0.operation, over: $1.operation, byTime: true) }
    }

    /// The order marks of one clone are chosen in (a split before a flag, then the earliest
    /// evidence), or listed in (`byTime`: the earliest evidence first); total, so that no
    /// replica's choice or listing depends on the order it holds them in.
    private static func preferred(_ a: CloneOp, over b: CloneOp, byTime: Bool = false) -> Bool {
        let tail = (a.device.id, a.laterIDFV.value, a.decidedBy)
        let other = (b.device.id, b.laterIDFV.value, b.decidedBy)
        if byTime {
            if a.earlierSeen != b.earlierSeen { return a.earlierSeen < b.earlierSeen }
            if a.action != b.action { return a.action == .split }
        } else {
            if a.action != b.action { return a.action == .split }
            if a.earlierSeen != b.earlierSeen { return a.earlierSeen < b.earlierSeen }
        }
        if tail != other { return tail < other }
        return a.appeared < b.appeared
    }
}

/// A suspected clone as `registryctl device clones` lists it: the operation that marked it, and
/// the devices it concerns as they resolve now.
public struct SuspectedClone: Hashable, Sendable {
    public let operation: CloneOp
    /// The canonical device of the device marked.
    public let device: DeviceID
    public let vendor: Vendor
    /// A split's new device, canonical now; nil for a flag.
    public let splitDevice: DeviceID?
}
