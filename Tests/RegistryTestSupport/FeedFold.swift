import RegistryCore

/// What a watcher makes of the change feed's events, written apart from the node: each device ID
/// to the device it is now, the forgotten IDs, and each account's devices, each by "the last
/// event says" (`docs/cluster.md`, "Watching changes"). A watcher whose cursor expired reads the
/// state again (``init(reading:policy:)``), as a client would.
public struct FeedFold: Equatable, Sendable {
    public var canonical: [DeviceID: DeviceID] = [:]
    public var gone: Set<DeviceID> = []
    public var bound: [AccountKey: Set<DeviceID>] = [:]
    /// Devices a clone event named (flagged or split), and the new devices of each one's splits.
    public var cloned: Set<DeviceID> = []
    public var splitOff: [DeviceID: Set<DeviceID>] = [:]
    /// Erased events the watcher was given, which a reader must pass over (``difference(from:)``
    /// reports any).
    public var erasedGiven = 0

    public init() {}

    /// The view a client builds by reading a node's state, the accounts under `policy`.
    public init(reading state: RegistryState, policy: (Vendor) -> BindingPolicy = { _ in .default }) {
        let snapshot = state.snapshot()
        canonical = snapshot.canonical
        gone = snapshot.gone.union(snapshot.tombstones)
        for key in Set(snapshot.bindings.map { AccountKey(vendor: $0.vendor, account: $0.account) }) {
            let devices =
                state.bindings(of: key)?.resolve(policy: policy(key.vendor), canonical: { state.canonical(of: $0) }).bound.map(\.device) ?? []
            if !devices.isEmpty { bound[key] = Set(devices) }
        }
        for clone in state.suspectedClones() {
            cloned.insert(clone.device)
            if let device = clone.splitDevice { splitOff[clone.device, default: []].insert(device) }
        }
    }

    public mutating func fold(_ event: FeedEvent) {
        switch event {
        case .created(let device, _):
            if canonical[device] == nil { canonical[device] = device }
        case .merged(let winner, let replaced, _):
            canonical[winner] = winner
            for device in replaced { canonical[device] = winner }
        case .forgotten(let devices, _):
            gone.formUnion(devices)
        case .bound(let account, _, let devices), .unbound(let account, _, _, let devices):
            bound[account] = Set(devices)
        case .cloneSuspected(let device, _):
            cloned.insert(device)
        case .split(let device, let newDevice, _):
            cloned.insert(device)
            splitOff[device, default: []].insert(newDevice)
        case .erased:
            // A reader passes over it: a watcher is never given one.
            erasedGiven += 1
        }
    }

    /// The view as it compares with a state: bound devices by their canonical device, without
    /// the forgotten ones, and no account left without a device.
    public var normalised: FeedFold {
        var view = self
        view.bound = [:]
        for (account, devices) in bound {
            let live = Set(devices.map { canonical[$0] ?? $0 }).filter { !gone.contains($0) }
            if !live.isEmpty { view.bound[account] = live }
        }
        view.cloned = Set(cloned.map { canonical[$0] ?? $0 }).filter { !gone.contains($0) }
        view.splitOff = [:]
        for (device, split) in splitOff where !gone.contains(canonical[device] ?? device) {
            view.splitOff[canonical[device] ?? device, default: []].formUnion(split.map { canonical[$0] ?? $0 })
        }
        return view
    }

    /// What differs from `expected` (both normalised), in a few words; nil when nothing does.
    /// Forgotten devices are compared among the devices `expected` knows.
    public func difference(from expected: FeedFold) -> String? {
        let (view, expected) = (normalised, expected.normalised)
        if view.erasedGiven > 0 { return "the watcher was given \(view.erasedGiven) erased events" }
        if view.canonical != expected.canonical {
            let wrong = expected.canonical.filter { view.canonical[$0.key] != $0.value }.prefix(3)
            let extra = view.canonical.keys.filter { expected.canonical[$0] == nil }.prefix(3)
            return "devices differ: \(wrong.map { "\($0.key) is \($0.value), watcher says \(view.canonical[$0.key].map { "\($0)" } ?? "nothing")" }) unknown to the node: \(Array(extra))"
        }
        let known = Set(expected.canonical.keys)
        if view.gone.intersection(known) != expected.gone.intersection(known) {
            return "forgotten devices differ: \(view.gone.intersection(known).symmetricDifference(expected.gone.intersection(known)).prefix(3))"
        }
        if view.cloned != expected.cloned || view.splitOff != expected.splitOff {
            return "suspected clones differ: node \(expected.cloned.sorted()) split \(expected.splitOff), watcher \(view.cloned.sorted()) split \(view.splitOff)"
        }
        if view.bound != expected.bound {
            let keys = Set(view.bound.keys).union(expected.bound.keys).filter { view.bound[$0] != expected.bound[$0] }.sorted().prefix(3)
            return "accounts differ: \(keys.map { "\($0): node \(expected.bound[$0] ?? []), watcher \(view.bound[$0] ?? [])" })"
        }
        return nil
    }
}
