/// An order-independent fingerprint of a registry's canonical content, kept up to date as the
/// state changes so that reading it costs nothing.
///
/// The state is a set of facts: each device (its ID, its canonical device's ID, its creation HLC
/// and origin, its vendor), each claim (vendor, identifier kind and value, the device that owns
/// it), each app sighting of a canonical device (bundle, first and last seen), each cluster
/// member (node, address, when it was set, removed) and each binding change. The digest is the
/// wrapping sum of a hash of each fact, so it does not depend on the order facts arrived in, and
/// a change costs the hashes of the facts it replaces and adds. Two replicas with equal version vectors must have equal
/// digests; different digests mean they hold different content (what equal counts can hide).
///
/// A claim's owner is part of its fact: every replica picks it by the same rule on what never
/// changes (see ``RegistryState``'s `claims`), so two replicas that hold the same operations
/// hold the same owners.
///
/// Names are hashed as text, never as the numbers a replica interned them under (those depend
/// on arrival order). The hash has a fixed, public key: the digest detects divergence, it does not
/// authenticate anything.
enum StateDigest {
    /// A 64-bit hash of `text`'s UTF-8 bytes with a fixed key, the same on every node.
    static func text(_ text: String) -> UInt64 {
        var hash: UInt64 = 0x6469_6765_7374_2d31
        for byte in text.utf8 { hash = foldedMultiply(hash ^ UInt64(byte), 0x9E37_79B9_7F4A_7C15) }
        return foldedMultiply(hash ^ UInt64(text.utf8.count), 0xA076_1D64_78BD_642F)
    }

    /// One word into a fact's hash (no array: facts are hashed on the request path).
    @inline(__always)
    static func step(_ hash: UInt64, _ word: UInt64) -> UInt64 {
        foldedMultiply(hash ^ word ^ 0xE703_7ED1_A0B4_28DB, 0x8EBC_6AF0_9C88_C6E3)
    }

    @inline(__always)
    static func finish(_ hash: UInt64) -> UInt64 { foldedMultiply(hash, 0x5899_65CC_7537_4CC3) ^ hash }

    static let deviceKind: UInt64 = 0x6465_7669_6365
    static let claimKind: UInt64 = 0x636C_6169_6D
    static let appKind: UInt64 = 0x6170_70
    static let memberKind: UInt64 = 0x6D65_6D62_6572
    static let bindingKind: UInt64 = 0x6269_6E64
    static let tombstoneKind: UInt64 = 0x746F_6D62
    static let vendorRuleKind: UInt64 = 0x7275_6C65

    static func device(id: UUID128, canonical: UUID128, created: UInt64, origin: UInt64, vendor: UInt64) -> UInt64 {
        finish(step(step(step(step(step(step(step(deviceKind, id.high), id.low), canonical.high), canonical.low), created), origin), vendor))
    }

    static func claim(vendor: UInt64, kind: Int32, value: UUID128, owner: UUID128) -> UInt64 {
        finish(step(step(step(step(step(step(claimKind, vendor), UInt64(UInt32(bitPattern: kind))), value.high), value.low), owner.high), owner.low))
    }

    static func app(device: UUID128, bundle: UInt64, first: UInt64, last: UInt64) -> UInt64 {
        finish(step(step(step(step(step(appKind, device.high), device.low), bundle), first), last))
    }

    static func binding(kind: UInt8, vendor: UInt64, account: UUID128, device: UUID128, time: UInt64, origin: UInt64) -> UInt64 {
        let head = step(step(step(step(bindingKind, UInt64(kind)), vendor), account.high), account.low)
        return finish(step(step(step(step(head, device.high), device.low), time), origin))
    }

    static func tombstone(_ device: UUID128) -> UInt64 {
        finish(step(step(step(tombstoneKind, device.high), device.low), 0))
    }

    static func vendorRule(_ change: VendorRuleChange) -> UInt64 {
        var text = "\(change.kind.rawValue)|\(change.name)|\(change.time.rawValue)|\(change.origin.value)"
        if let rule = change.rule {
            text += "|\(rule.prefixes.joined(separator: ","))|\(rule.binding.maxDevices)|\(rule.binding.activeWithinDays ?? 0)|\(rule.binding.pastLimit.rawValue)"
        }
        // A change without a move hashes as it did before moves existed.
        if let move = change.move { text += "|move \(move.from.joined(separator: ","))>\(move.into)" }
        // So does a rule with the default clone policy, as before clone policies existed.
        if let clones = change.rule?.clones, clones != .default { text += "|clones \(clones.action.rawValue)/\(clones.windowDays)" }
        return finish(step(vendorRuleKind, StateDigest.text(text)))
    }

    static let cloneKind: UInt64 = 0x636C_6F6E_65

    static func clone(_ op: CloneOp) -> UInt64 {
        var hash = step(step(step(step(cloneKind, UInt64(op.action.rawValue)), op.device.id.uuid.high), op.device.id.uuid.low), op.laterIDFV.value.high)
        hash = step(step(step(step(hash, op.laterIDFV.value.low), op.appeared.rawValue), op.earlierSeen.rawValue), text(op.bundle.value))
        hash = step(hash, text(op.decidedBy.value))
        if let keychain = op.keychain, let newDevice = op.newDevice {
            hash = step(step(step(step(hash, keychain.value.high), keychain.value.low), newDevice.id.uuid.high), newDevice.id.uuid.low)
            hash = step(step(hash, newDevice.created.rawValue), text(newDevice.origin.value))
        }
        return finish(hash)
    }

    static func member(_ node: NodeID, _ member: Member) -> UInt64 {
        finish(step(step(step(step(memberKind, text(node.value)), text(member.address)), member.addressAt.rawValue), member.removed ? 1 : 0))
    }
}

/// The digests of interned names, by their numbers: a name is hashed once, when a fact first
/// needs it (``fill(through:in:text:)``); after that a digest is one array read.
struct NameDigests: Sendable {
    private(set) var digests: [UInt64] = []

    /// Hashes the names up to `number` that are not hashed yet.
    mutating func fill<Name>(through number: UInt32, in names: Interner<Name>, text: (Name) -> String) {
        while digests.count <= Int(number) { digests.append(StateDigest.text(text(names[UInt32(digests.count)]))) }
    }

    @inline(__always)
    func has(_ number: UInt32) -> Bool { Int(number) < digests.count }

    @inline(__always)
    subscript(number: UInt32) -> UInt64 { digests[Int(number)] }
}

extension RegistryState {
    @inline(__always)
    mutating func vendorDigest(_ number: UInt32) -> UInt64 {
        if !vendorDigests.has(number) { vendorDigests.fill(through: number, in: vendors) { $0.name } }
        return vendorDigests[number]
    }

    @inline(__always)
    mutating func originDigest(_ number: UInt32) -> UInt64 {
        if !originDigests.has(number) { originDigests.fill(through: number, in: origins) { $0.value } }
        return originDigests[number]
    }

    @inline(__always)
    mutating func bundleDigest(_ number: UInt32) -> UInt64 {
        if !bundleDigests.has(number) { bundleDigests.fill(through: number, in: bundles) { $0.value } }
        return bundleDigests[number]
    }

    /// The hash of device `number`'s fact as the state holds it now.
    mutating func deviceFact(_ number: UInt32) -> UInt64 {
        let slot = slots[number]
        return StateDigest.device(
            id: slot.id, canonical: slots[slot.canonical].id, created: slot.created, origin: originDigest(slot.origin),
            vendor: vendorDigest(slot.vendor))
    }

    /// The hash of the fact "`key` is claimed by device `owner`".
    mutating func claimFact(_ key: ClaimKey, owner: UInt32) -> UInt64 {
        StateDigest.claim(vendor: vendorDigest(key.vendor), kind: key.kind, value: key.value, owner: slots[owner].id)
    }

    mutating func appFact(on root: UInt32, bundle: UInt32, first: UInt64, last: UInt64) -> UInt64 {
        StateDigest.app(device: slots[root].id, bundle: bundleDigest(bundle), first: first, last: last)
    }

    /// The hash of the fact "binding change `change` is held", its vendor and origin interned as
    /// `vendor` and `origin`.
    mutating func bindingFact(_ change: BindingChange, vendor: UInt32, origin: UInt32) -> UInt64 {
        StateDigest.binding(
            kind: change.kind.rawValue, vendor: vendorDigest(vendor), account: change.account, device: change.device.uuid,
            time: change.time.rawValue, origin: originDigest(origin))
    }

    /// The digest computed from nothing but the content: every fact hashed again and summed. The
    /// kept ``digest`` must always equal it; tests and `registryctl cluster verify` compare them.
    public func recomputedDigest() -> UInt64 {
        let vendorNames = (0..<UInt32(vendors.count)).map { StateDigest.text(vendors[$0].name) }
        let originNames = (0..<UInt32(origins.count)).map { StateDigest.text(origins[$0].value) }
        let bundleNames = (0..<UInt32(bundles.count)).map { StateDigest.text(bundles[$0].value) }
        var sum: UInt64 = 0
        for number in 0..<UInt32(slots.count) {
            let slot = slots[number]
            sum &+= StateDigest.device(
                id: slot.id, canonical: slots[slot.canonical].id, created: slot.created, origin: originNames[Int(slot.origin)],
                vendor: vendorNames[Int(slot.vendor)])
            if slot.app != Self.noApp {
                sum &+= StateDigest.app(device: slot.id, bundle: bundleNames[Int(slot.app)], first: slot.firstSeen, last: slot.lastSeen)
            }
            for app in moreApps[number] ?? [] {
                sum &+= StateDigest.app(device: slot.id, bundle: bundleNames[Int(app.bundle)], first: app.firstSeen, last: app.lastSeen)
            }
        }
        claims.forEach { key, owner in
            sum &+= StateDigest.claim(vendor: vendorNames[Int(key.vendor)], kind: key.kind, value: key.value, owner: slots[owner].id)
        }
        for (node, member) in clusterMembers { sum &+= StateDigest.member(node, member) }
        for device in tombstones { sum &+= StateDigest.tombstone(device) }
        for change in vendorRuleHistory.changes { sum &+= StateDigest.vendorRule(change) }
        for op in clones { sum &+= StateDigest.clone(op) }
        accountTable.forEachChange { change in
            sum &+= StateDigest.binding(
                kind: change.kind.rawValue, vendor: StateDigest.text(change.vendor.name), account: change.account,
                device: change.device.uuid, time: change.time.rawValue, origin: StateDigest.text(change.origin.value))
        }
        return sum
    }
}
