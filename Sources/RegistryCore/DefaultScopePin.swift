/// Which default vendor scope a node serves, given the one its data directory pinned and the one
/// its configuration names: the rule that keeps a newer Public Suffix List (or another depth)
/// from moving a device silently. A plain value; the node reads and writes the pin.
///
/// - No pin and no data: the configured scope, pinned from now on.
/// - No pin but data (a directory written before pins existed, which served a depth): that
///   depth is taken as the pin.
/// - A pin that differs from the configured scope: the configured scope is taken, and pinned,
///   only if it would move none of the devices the node holds to another vendor; otherwise the
///   pin stays, and the node says how many devices the configured scope would move.
public struct DefaultScopePin: Equatable, Sendable {
    /// What the node does about the difference, for its log.
    public enum Outcome: Equatable, Sendable {
        /// Pinned and configured agree.
        case same
        /// A new data directory: the configured scope is pinned.
        case pinned
        /// A data directory written before pins: the depth it served is pinned.
        case pinnedEarlierDepth
        /// The configured scope replaced the pinned one: it moves no device held.
        case replaced(previous: DefaultVendorScope)
        /// The pin stays: the configured scope would move `devices` devices, of these bundles.
        case kept(configured: DefaultVendorScope, devices: Int, bundles: [BundleID])
    }

    /// The rules the node serves: the rules given, with the scope decided.
    public let rules: VendorRules
    /// Whether the node writes ``rules``' scope as its new pin.
    public let writesPin: Bool
    public let outcome: Outcome

    /// Decides for a node whose directory pinned `pinned` (nil: no pin) and holds `state`, whose
    /// configuration gives `configured` (its rules, and the scope it names). `earlierDepth` is
    /// the depth a directory written before pins served (the config file's `vendorDefaultDepth`
    /// then, 2 by default).
    public init(pinned: DefaultVendorScope?, configured: VendorRules, state: RegistryState, earlierDepth: Int = 2) throws(IdentityError) {
        let holdsData =
            state.deviceCount > 0 || state.aliasCount > 0 || !state.vendorRuleHistory.changes.isEmpty || state.bindingChangeCount > 0
            || state.tombstoneCount > 0 || !state.clusterMembers.isEmpty
        // The rules the state's devices were filed under: the cluster's when it has any.
        let inForce = state.vendorRuleHistory.changes.isEmpty ? configured.rules : state.vendorRuleHistory.rules
        var outcome = Outcome.same
        var pin: DefaultVendorScope
        if let pinned {
            pin = pinned
        } else if holdsData {
            pin = .labels(earlierDepth)
            outcome = .pinnedEarlierDepth
        } else {
            pin = configured.defaultScope
            outcome = .pinned
        }
        if pin != configured.defaultScope {
            let moved = state.devicesMoved(
                from: try VendorRules(rules: inForce, defaultScope: pin), to: try VendorRules(rules: inForce, defaultScope: configured.defaultScope))
            if moved.devices == 0 {
                outcome = .replaced(previous: pin)
                pin = configured.defaultScope
            } else {
                outcome = .kept(configured: configured.defaultScope, devices: moved.devices, bundles: moved.bundles)
            }
        }
        rules = try configured.with(defaultScope: pin)
        writesPin = pinned != pin
        self.outcome = outcome
    }
}
