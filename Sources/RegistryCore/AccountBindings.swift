/// The bindings of one account: every change it was given, in order, and the rule that turns them
/// into the devices bound now.
///
/// The rule (`docs/identity.md`, "Accounts"): start with no device bound and take the changes in
/// ``BindingChange/precedes(_:)`` order. Each change's device is first taken to its canonical
/// device, so a merge unions the bindings of the devices it joins; the changes of a device the
/// replica does not hold (not yet replicated, or forgotten) are skipped. An unbind removes the device. A bind of a bound device marks it active
/// at the bind's time. A bind of another device binds it while fewer than the policy's limit are
/// counted; past it, `reject` refuses the bind and `replace` first unbinds the least recently
/// active counted device. A bind of a device bound but outside the policy's window counts it
/// again, so it takes a place as a new device does.
///
/// The result depends only on the set of changes, the merges and the policy, never on the order
/// changes arrived in, so replicas that hold the same changes agree. Two nodes that cannot hear
/// each other may each accept a bind that the rule later refuses or replaces; ``Resolution``
/// names those devices, so that the account's owner can be told.
public struct AccountBindings: Sendable {
    /// Every change of the account, in applying order, each once.
    public private(set) var changes: [BindingChange] = []

    public init() {}

    /// The bindings of `changes`, distinct changes of one account in any order.
    init(changes: [BindingChange]) {
        self.changes = changes.sorted { $0.precedes($1) }
    }

    /// Puts `change` in its place; false when it was already held (a change delivered again).
    @discardableResult
    public mutating func insert(_ change: BindingChange) -> Bool {
        var low = changes.startIndex
        var high = changes.endIndex
        while low < high {
            let middle = (low + high) / 2
            if changes[middle].precedes(change) { low = middle + 1 } else { high = middle }
        }
        if low < changes.endIndex, changes[low] == change { return false }
        changes.insert(change, at: low)
        return true
    }

    /// Removes the changes `shouldRemove` picks; returns them.
    mutating func removeChanges(where shouldRemove: (BindingChange) -> Bool) -> [BindingChange] {
        let removed = changes.filter(shouldRemove)
        if !removed.isEmpty { changes.removeAll(where: shouldRemove) }
        return removed
    }

    /// The account's devices now: the rule applied to every change held.
    public func resolve(policy: BindingPolicy, canonical: (DeviceID) -> DeviceID?) -> Resolution {
        folded(policy: policy, canonical: canonical).resolution
    }

    /// What applying `candidate`, a change newer than every one held, would do: what a node
    /// answers the request that asks for it (its HLC puts it after everything the node holds). A
    /// change whose outcome is ``Outcome/rejected(bound:)`` or ``Outcome/notBound`` changes nothing
    /// and is not logged: an unbind that finds nothing bound is answered as such, and does not
    /// unbind a bind this node has not heard of yet.
    public func decide(_ candidate: BindingChange, policy: BindingPolicy, canonical: (DeviceID) -> DeviceID?) -> Outcome {
        precondition(changes.last.map { $0.precedes(candidate) } ?? true, "a decided change must follow every change held")
        var fold = folded(policy: policy, canonical: canonical)
        guard let device = canonical(candidate.device) else { return .notBound }
        return fold.apply(candidate, to: device, policy: policy)
    }

    private func folded(policy: BindingPolicy, canonical: (DeviceID) -> DeviceID?) -> Fold {
        var fold = Fold()
        for change in changes {
            guard let device = canonical(change.device) else { continue }
            _ = fold.apply(change, to: device, policy: policy)
        }
        return fold
    }

    /// What one change did to the account.
    public enum Outcome: Hashable, Sendable {
        /// The device is bound now and counts; `replaced` is the device the `replace` policy
        /// unbound to make room for it (also when it was bound, but outside the window).
        case bound(replaced: DeviceID?)
        /// The device was bound already; the bind marked it active.
        case alreadyBound
        /// The bind is refused: the account has as many counted devices as its policy allows.
        /// `bound` lists every bound device, counted or not, so that the user can choose one to
        /// unbind (a device outside the window takes no place, so unbinding it frees none).
        case rejected(bound: [BoundDevice])
        /// The unbind removed the device.
        case unbound
        /// The unbind found the device not bound, or the change names a device the replica does
        /// not hold.
        case notBound
    }

    /// The account's devices after every change held.
    public struct Resolution: Hashable, Sendable {
        /// The devices bound now, by device ID.
        public var bound: [BoundDevice]
        /// The devices a bind was applied to that are not bound now, by device ID, each with the
        /// last reason it lost its binding.
        public var unbound: [UnboundDevice]
    }

    /// The rule's running state: the devices bound so far.
    private struct Fold {
        var bound: [DeviceID: BoundDevice] = [:]
        var unbound: [DeviceID: UnboundDevice] = [:]

        mutating func apply(_ change: BindingChange, to device: DeviceID, policy: BindingPolicy) -> Outcome {
            switch change.kind {
            case .unbind:
                guard bound.removeValue(forKey: device) != nil else { return .notBound }
                unbound[device] = UnboundDevice(device: device, reason: .unbound, time: change.time)
                return .unbound
            case .bind:
                let since = policy.countedSince(change.time)
                var replaced: DeviceID?
                // A device not bound, or bound but outside the window (this bind would count it
                // again), takes a place; a counted one is only marked active.
                let takesPlace = bound[device].map { $0.lastActive.millis < since } ?? true
                if takesPlace {
                    let counted = bound.values.filter { $0.device != device && $0.lastActive.millis >= since }
                    if counted.count >= policy.maxDevices {
                        switch policy.pastLimit {
                        case .reject:
                            if bound[device] == nil {
                                unbound[device] = UnboundDevice(device: device, reason: .refused, time: change.time)
                            }
                            return .rejected(bound: bound.values.sorted { $0.device < $1.device })
                        case .replace:
                            let oldest = counted.min { ($0.lastActive, $0.device) < ($1.lastActive, $1.device) }!
                            bound[oldest.device] = nil
                            unbound[oldest.device] = UnboundDevice(
                                device: oldest.device, reason: .replaced(by: device), time: change.time)
                            replaced = oldest.device
                        }
                    }
                }
                if var existing = bound[device] {
                    existing.lastActive = max(existing.lastActive, change.time)
                    bound[device] = existing
                    return replaced.map { .bound(replaced: $0) } ?? .alreadyBound
                }
                bound[device] = BoundDevice(device: device, since: change.time, lastActive: change.time)
                unbound[device] = nil
                return .bound(replaced: replaced)
            }
        }

        var resolution: Resolution {
            Resolution(
                bound: bound.values.sorted { $0.device < $1.device },
                unbound: unbound.values.sorted { $0.device < $1.device })
        }
    }
}

/// A device an account is bound to.
public struct BoundDevice: Hashable, Sendable {
    public let device: DeviceID
    /// The bind that bound it.
    public let since: HLCTimestamp
    /// Its latest bind: the activity the policy's window and the `replace` order read.
    public var lastActive: HLCTimestamp
}

/// A device an account was bound to, or asked to be bound to, and is not.
public struct UnboundDevice: Hashable, Sendable {
    public enum Reason: Hashable, Sendable {
        /// An unbind removed it.
        case unbound
        /// A bind past the limit took its place under the `replace` policy.
        case replaced(by: DeviceID)
        /// Its bind came past the limit under the `reject` policy: a node that accepted that bind
        /// had not yet heard of the earlier binds that filled the account, or the vendor has
        /// lowered its limit since (the policy in force applies to the whole history).
        case refused
    }

    public let device: DeviceID
    public let reason: Reason
    /// The change that unbound it.
    public let time: HLCTimestamp
}
