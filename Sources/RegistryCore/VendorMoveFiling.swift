/// How a replica carries out vendor moves (``VendorAliases``): every device, claim and binding
/// change of a vendor that a move joined to another is filed under the name the joined vendor
/// goes by, and claims that meet there merge their devices as any two claims of one identifier
/// do. Operations that arrive later naming the old vendor are filed the same way as they are
/// applied, so the state depends on the set of operations alone, whatever their order.
extension RegistryState {
    /// Files everything held under an alias under the name it stands for now. Walks every
    /// device, claim and binding change: a move is rare, and the operator asked for it.
    mutating func fileUnderAliases() {
        let aliases = vendorRuleHistory.aliases
        guard !aliases.isEmpty else { return }
        // By interned vendor: the one it is filed under now, or `unmoved`. An array, not a
        // dictionary: it is read for every device and claim.
        let unmoved = UInt32.max
        var target = [UInt32](repeating: unmoved, count: vendors.count)
        for number in 0..<UInt32(vendors.count) {
            if let name = aliases.canonical[vendors[number].name] { target[Int(number)] = vendors.intern(Vendor(trusted: name)) }
        }
        guard target.contains(where: { $0 != unmoved }) else { return }
        func moved(_ vendor: UInt32) -> UInt32? {
            Int(vendor) < target.count && target[Int(vendor)] != unmoved ? target[Int(vendor)] : nil
        }

        for number in 0..<UInt32(slots.count) {
            guard let into = moved(slots[number].vendor) else { continue }
            digest &-= deviceFact(number)
            slots[number].vendor = into
            digest &+= deviceFact(number)
        }

        let movedClaims = claims.removeAll { key, _ in moved(key.vendor) != nil }
        for (key, owner) in movedClaims { digest &-= claimFact(key, owner: owner) }
        for (key, owner) in movedClaims {
            let identifier = Identifier(kind: IdentifierKind(rawValue: key.kind)!, value: key.value)
            claim(ClaimKey(vendor: moved(key.vendor)!, identifier: identifier), for: owner)
        }

        var changes = [BindingChange]()
        accountTable.forEachChange { changes.append($0) }
        guard changes.contains(where: { moved(vendors.number(of: $0.vendor)!) != nil }) else { return }
        // Every change's fact out, and each one the rebuilt table holds back in: a moved change
        // may be one the table held already under the joined vendor.
        var rebuilt = AccountTable()
        for change in changes {
            let (vendor, origin) = (vendors.number(of: change.vendor)!, origins.number(of: change.origin)!)
            digest &-= bindingFact(change, vendor: vendor, origin: origin)
            let into = moved(vendor) ?? vendor
            let filed = into == vendor ? change : change.filed(under: vendors[into])
            if rebuilt.insert(filed) { digest &+= bindingFact(filed, vendor: into, origin: origin) }
        }
        accountTable = rebuilt
    }

    /// `change` as this replica files it: under the vendor a move joined its vendor to, if any.
    func filing(_ change: BindingChange) -> BindingChange {
        let vendor = vendorRuleHistory.aliases.filing(change.vendor)
        return vendor == change.vendor ? change : change.filed(under: vendor)
    }

    /// What changing the vendor rules from `old` to `new` would move: the devices (not gone) that
    /// hold an app the change sends to another vendor than the one the device is filed under, and
    /// those apps' bundles, sorted. `changing` names the vendor whose rule changes (nil: a change
    /// of the default scope); see ``bundleDestinations(from:to:changing:)`` for what the change sends
    /// where. Reads every device only when the change touches some bundle seen.
    public func devicesMoved(from old: VendorRules, to new: VendorRules, changing name: String? = nil) -> (devices: Int, bundles: [BundleID]) {
        let sent = bundleDestinations(from: old, to: new, changing: name)
        guard sent.contains(where: { $0 != nil }) else { return (0, []) }
        var devices = 0
        var seen = Set<UInt32>()
        forEachApp { vendor, apps in
            var moves = false
            for bundle in apps {
                guard let destination = sent[Int(bundle)], destination != vendors[vendor] else { continue }
                seen.insert(bundle)
                moves = true
            }
            if moves { devices += 1 }
        }
        return (devices, seen.map { bundles[$0] }.sorted { $0.value < $1.value })
    }

    /// For every vendor some device is filed under (gone devices aside), the vendors a change of
    /// the rules from `old` to `new` (of `changing`'s rule) sends its devices' apps to, or leaves
    /// them in, when that is not only itself: what the change moves (``VendorMove/planned(destinations:)``).
    public func destinations(from old: VendorRules, to new: VendorRules, changing name: String) -> [Vendor: Set<Vendor>] {
        let sent = bundleDestinations(from: old, to: new, changing: name)
        var result = [UInt32: Set<Vendor>]()
        forEachApp { vendor, apps in
            for bundle in apps { result[vendor, default: []].insert(sent[Int(bundle)] ?? vendors[vendor]) }
        }
        var moving = [Vendor: Set<Vendor>]()
        for (number, destinations) in result where destinations != [vendors[number]] { moving[vendors[number]] = destinations }
        return moving
    }

    /// By bundle number, where a change of the rules from `old` to `new` sends the bundle's
    /// devices: the vendor `new` names for it (``VendorRules/namedVendor(of:)``), when the change
    /// touches the bundle (the rules name another vendor for it than before, or name the vendor
    /// `changing`, whose rule it is); nil when it does not, and the devices stay where they are
    /// filed. So an unrelated change moves nothing, even for bundles whose named vendor is an
    /// alias; and a change of a vendor's rule sends all of its bundles' devices to it, those
    /// filed elsewhere by a concurrent change included.
    private func bundleDestinations(from old: VendorRules, to new: VendorRules, changing name: String?) -> [Vendor?] {
        (0..<UInt32(bundles.count)).map { number in
            let (before, after) = (old.namedVendor(of: bundles[number]), new.namedVendor(of: bundles[number]))
            return before != after || after.name == name ? after : nil
        }
    }

    /// Calls `body` with the interned vendor and the interned app bundles of every canonical
    /// device that is not gone.
    private func forEachApp(_ body: (_ vendor: UInt32, _ apps: [UInt32]) -> Void) {
        for number in 0..<UInt32(slots.count) where slots[number].canonical == number && !goneRoots.contains(number) {
            var apps = slots[number].app == Self.noApp ? [] : [slots[number].app]
            for app in moreApps[number] ?? [] { apps.append(app.bundle) }
            body(slots[number].vendor, apps)
        }
    }
}

extension BindingChange {
    /// The same change, of vendor `vendor`.
    func filed(under vendor: Vendor) -> BindingChange {
        BindingChange(kind: kind, vendor: vendor, account: account, device: device, time: time, origin: origin)
    }
}
