extension RegistryState {
    /// What a registration this node just decided shows of a cloned keychain: the operation to
    /// log, or nil (`docs/identity.md`, "Keychains cloned onto another phone").
    ///
    /// The signal: the registration presents a keychain UUID and an IDFV, both claimed by one
    /// device; that device's keychain took a later IDFV (``LaterIDFV``) after the presented one,
    /// at most `policy`'s window before this registration. The earlier IDFV is in use again
    /// after the later one appeared: two phones. An IDFV that a reset, or a restore onto the same
    /// phone, replaced stays silent, and shows nothing. Each (device, later IDFV) is marked once.
    ///
    /// - Parameters:
    ///   - registration: as decided, its identifiers sealed.
    ///   - op: the operation ``register(_:at:origin:mint:)`` returned for it (applied already).
    ///   - time: the clone operation's own HLC, after the registration's.
    ///   - key: the cluster's minting key, for a split's new device.
    public func suspectedClone(
        of registration: Registration, decided op: RegistrationOp, policy: ClonePolicy, at time: HLCTimestamp, origin: NodeID,
        key: MintingKey
    ) -> CloneOp? {
        guard policy.action != .off, !laterIDFVs.isEmpty,
            let idfv = registration.identifiers.first(where: { $0.kind == .idfv }),
            let keychain = registration.identifiers.first(where: { $0.kind == .keychain }),
            let number = slotNumber(of: op.device.id.uuid)
        else { return nil }
        let root = slots[number].canonical
        let set = [root] + (members[root] ?? [])
        let later = set.flatMap { laterIDFVs[$0] ?? [] }
        guard !later.isEmpty, !goneRoots.contains(root) else { return nil }
        let vendor = slots[root].vendor
        var passed = [UInt32]()
        let idfvClaim = liveClaim(of: idfv, vendor: vendor, passing: &passed).key
        let keychainClaim = liveClaim(of: keychain, vendor: vendor, passing: &passed).key
        // Both claimed by this device, through a keychain claim no split contested.
        guard !contestedClaims.contains(ClaimKey(vendor: vendor, identifier: keychainClaim)),
            let keychainOwner = claims.value(for: ClaimKey(vendor: vendor, identifier: keychainClaim)), slots[keychainOwner].canonical == root,
            let idfvOwner = claims.value(for: ClaimKey(vendor: vendor, identifier: idfvClaim)), slots[idfvOwner].canonical == root
        else { return nil }
        // When the presented IDFV is itself a later one, only IDFVs that came before it count.
        let presentedAppeared = later.filter { $0.claim == idfvClaim.value }.map(\.appeared).min()
        let seen = op.seen
        let candidates = later.filter { entry in
            entry.claim != idfvClaim.value && entry.appeared < seen.rawValue
                && presentedAppeared.map { $0 < entry.appeared } ?? true
                && HLCTimestamp(rawValue: entry.appeared).millis + policy.windowMillis >= seen.millis
                && !set.contains { cloneKeys.contains(CloneKey(device: slots[$0].id, laterIDFV: entry.claim)) }
        }
        // The earliest later IDFV first: the one the earlier phone's keychain was copied to.
        guard let evidence = candidates.min(by: { ($0.appeared, $0.claim) < ($1.appeared, $1.claim) }) else { return nil }
        let laterClaim = Identifier(kind: .idfv, value: evidence.claim)
        let device = ref(root)
        switch policy.action {
        case .off:
            return nil
        case .flag:
            return CloneOp(
                action: .flag, device: device, laterIDFV: laterClaim, appeared: HLCTimestamp(rawValue: evidence.appeared), earlierSeen: seen,
                bundle: op.bundle, decidedBy: origin)
        case .split:
            // Minted from the successor claim, so that two nodes splitting at once name one device.
            let id = DeviceID.minted(vendor: device.vendor, idfv: laterClaim.splitSuccessor.value, key: key)
            return CloneOp(
                action: .split, device: device, laterIDFV: laterClaim, appeared: HLCTimestamp(rawValue: evidence.appeared), earlierSeen: seen,
                bundle: op.bundle, keychain: keychainClaim, newDevice: DeviceRef(id: id, created: time, origin: origin, vendor: device.vendor),
                decidedBy: origin)
        }
    }
}
