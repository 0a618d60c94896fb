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
        var rebuilt = AccountTable()
        for change in changes {
            let vendor = vendors.number(of: change.vendor)!
            guard let into = moved(vendor) else {
                _ = rebuilt.insert(change)
                continue
            }
            let origin = origins.number(of: change.origin)!
            digest &-= bindingFact(change, vendor: vendor, origin: origin)
            let filed = change.filed(under: vendors[into])
            if rebuilt.insert(filed) { digest &+= bindingFact(filed, vendor: into, origin: origin) }
        }
        accountTable = rebuilt
    }

    /// `change` as this replica files it: under the vendor a move joined its vendor to, if any.
    func filing(_ change: BindingChange) -> BindingChange {
        let vendor = vendorRuleHistory.aliases.filing(change.vendor)
        return vendor == change.vendor ? change : change.filed(under: vendor)
    }

    /// For every vendor some device is filed under (gone devices aside), the vendors that `rules`
    /// name for its devices' apps (``VendorRules/namedVendor(of:)``), when that is not only
    /// itself: what changing the rules to `rules` would move (``VendorMove/planned(destinations:)``).
    public func destinations(under rules: VendorRules) -> [Vendor: Set<Vendor>] {
        var byBundle = [UInt32: Vendor]()
        var result = [UInt32: Set<Vendor>]()
        func note(_ bundle: UInt32, of vendor: UInt32) {
            let destination = byBundle[bundle] ?? rules.namedVendor(of: bundles[bundle])
            byBundle[bundle] = destination
            result[vendor, default: []].insert(destination)
        }
        for number in 0..<UInt32(slots.count) where slots[number].canonical == number && !goneRoots.contains(number) {
            if slots[number].app != Self.noApp { note(slots[number].app, of: slots[number].vendor) }
            for app in moreApps[number] ?? [] { note(app.bundle, of: slots[number].vendor) }
        }
        var moving = [Vendor: Set<Vendor>]()
        for (number, destinations) in result where destinations != [vendors[number]] { moving[vendors[number]] = destinations }
        return moving
    }
}

extension BindingChange {
    /// The same change, of vendor `vendor`.
    func filed(under vendor: Vendor) -> BindingChange {
        BindingChange(kind: kind, vendor: vendor, account: account, device: device, time: time, origin: origin)
    }
}
