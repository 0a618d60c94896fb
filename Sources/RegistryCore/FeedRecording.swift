/// What a state records of its changes while a node serves watchers: the events of the
/// operations applied since the node last took them (``RegistryState/takeEvents()``), and what
/// the binding events need to know that the state does not keep.
struct FeedRecording: Sendable {
    var events: [FeedEvent] = []
    /// The node's configured vendor rules: their binding policies are in force while the cluster
    /// has made no change of its rules (as ``VendorRuleHistory`` says for the rules themselves).
    let configuredRules: [VendorRule]
}

extension RegistryState {
    /// Starts recording a ``FeedEvent`` for every change applied from now on, the binding
    /// events under `configuredRules`' policies until the cluster changes its rules.
    public mutating func recordEvents(configuredRules: [VendorRule]) {
        feedRecording = FeedRecording(configuredRules: configuredRules)
    }

    /// Whether ``recordEvents(configuredRules:)`` was called.
    public var recordsEvents: Bool { feedRecording != nil }

    /// The events recorded since the last call, in the order they happened.
    public mutating func takeEvents() -> [FeedEvent] {
        guard feedRecording != nil, !feedRecording!.events.isEmpty else { return [] }
        defer { feedRecording!.events.removeAll(keepingCapacity: true) }
        return feedRecording!.events
    }

    mutating func record(_ event: FeedEvent) {
        feedRecording?.events.append(event)
    }

    /// Records that canonical slot `root` heads its merge set, whole.
    mutating func recordMerge(of root: UInt32) {
        let replaced = (members[root] ?? []).map { DeviceID(slots[$0].id) }.sorted()
        record(.merged(winner: DeviceID(slots[root].id), replaced: replaced, vendor: vendors[slots[root].vendor]))
    }

    /// The devices `key`'s account is bound to now, each by its canonical device.
    func boundDevices(of key: AccountKey) -> Set<DeviceID> {
        guard let bindings = accountTable.bindings(of: key) else { return [] }
        return Set(bindings.resolve(policy: feedBindingPolicy(of: key.vendor), canonical: { canonical(of: $0) }).bound.map(\.device))
    }

    /// The accounts whose binding changes name a device of the merge set canonical slot `root`
    /// heads: the ones a merge of that set may change.
    func accountsNaming(setOf root: UInt32) -> [AccountKey] {
        guard accountTable.changeCount > 0 else { return [] }
        return accountTable.accounts(naming: ([root] + (members[root] ?? [])).map { slots[$0].id })
    }

    /// Records what an operation that touched `key`'s account did to it (the account was bound
    /// to `before`): a ``FeedEvent/bound(account:device:bound:)`` for each device bound now, an
    /// ``FeedEvent/unbound(account:device:reason:bound:)`` for each device no longer bound, each
    /// with every device bound now. `change`, when the operation is a change of the account, also
    /// reports its own device when the rule refused its bind (a concurrent bind that lost) and
    /// when it unbinds a device this replica held no bind of.
    ///
    /// When nothing changed here, the account's devices are said again, of the change's device or
    /// else of `touched`: a watcher that resumed here from another node's view has a state that
    /// the operation may have changed, and this node's is the one its cursor will claim.
    mutating func recordBindingEvents(of key: AccountKey, before: Set<DeviceID>, change: BindingChange? = nil, touched: DeviceID) {
        let resolution = accountTable.bindings(of: key)?.resolve(policy: feedBindingPolicy(of: key.vendor), canonical: { canonical(of: $0) })
        let after = Set(resolution?.bound.map(\.device) ?? [])
        let now = after.sorted()
        func reason(_ device: DeviceID) -> UnboundDevice.Reason { resolution?.unbound.first { $0.device == device }?.reason ?? .unbound }
        // A device merged since is the same binding under its new canonical device.
        let before = Set(before.map { canonical(of: $0) ?? $0 })
        var unboundNow = before.subtracting(after)
        let own = change.map { canonical(of: $0.device) ?? $0.device }
        if let change, let own, !after.contains(own) {
            let refused = resolution?.unbound.contains { $0.device == own && $0.time == change.time && $0.reason == .refused } ?? false
            if change.kind == .unbind || refused { unboundNow.insert(own) }
        }
        let boundNow = after.subtracting(before)
        for device in boundNow.sorted() { record(.bound(account: key, device: device, bound: now)) }
        for device in unboundNow.sorted() { record(.unbound(account: key, device: device, reason: reason(device), bound: now)) }
        guard boundNow.isEmpty, unboundNow.isEmpty else { return }
        let subject = own ?? touched
        record(
            after.contains(subject)
                ? .bound(account: key, device: subject, bound: now) : .unbound(account: key, device: subject, reason: reason(subject), bound: now))
    }

    /// The vendor rules whose binding policies are in force: the cluster's once it changed them,
    /// the configured ones before (as ``VendorRules/bindingPolicy(of:)`` reads them).
    var feedRules: [VendorRule] {
        vendorRuleHistory.changes.isEmpty ? feedRecording?.configuredRules ?? [] : vendorRuleHistory.rules
    }

    /// The binding policy of `vendor` under ``feedRules``, or under `rules`.
    private func feedBindingPolicy(of vendor: Vendor, rules: [VendorRule]? = nil) -> BindingPolicy {
        (rules ?? feedRules).first { $0.name == vendor.name }?.binding ?? .default
    }

    /// A change of the vendor rules was applied, under `rulesBefore` until then: every account of
    /// a vendor whose binding policy it changed is said again (its devices may differ now).
    mutating func recordPolicyChanges(rulesBefore: [VendorRule]) {
        let rulesAfter = feedRules
        let names = Set((rulesBefore + rulesAfter).map(\.name)).filter { name in
            let vendor = Vendor(trusted: name)
            return feedBindingPolicy(of: vendor, rules: rulesBefore) != feedBindingPolicy(of: vendor, rules: rulesAfter)
        }
        guard !names.isEmpty, accountTable.changeCount > 0 else { return }
        var changed = [AccountKey: DeviceID]()
        accountTable.forEachChange { change in
            if names.contains(change.vendor.name) { changed[AccountKey(vendor: change.vendor, account: change.account)] = change.device }
        }
        for (key, device) in changed.sorted(by: { $0.key < $1.key }) {
            let before = accountTable.bindings(of: key)?
                .resolve(policy: feedBindingPolicy(of: key.vendor, rules: rulesBefore), canonical: { canonical(of: $0) }).bound.map(\.device) ?? []
            recordBindingEvents(of: key, before: Set(before), touched: canonical(of: device) ?? device)
        }
    }
}
