import RegistryCore
import RegistryWire

/// Produces the seeded stream of ``LoadUnit``s for a mix, and keeps the model of acknowledged
/// devices that the known-device kinds and `--verify` need. A plain value: the same seed and the
/// same acknowledgements in the same order give the same units.
public struct WorkloadGenerator: Sendable {
    public let mix: WorkloadMix
    public let catalogue: LoadCatalogue
    /// Whether acknowledged devices are kept (needed by known-device kinds and by verification).
    public let tracksDevices: Bool
    private var random: SplitMix64
    public private(set) var devices: [ModelDevice] = []
    /// Accounts the binding kinds made, by ``LoadUnit/account``.
    public private(set) var accounts: [ModelAccount] = []
    /// Accounts with a bind or a move in flight: not moved again until it is answered.
    private var busyAccounts = Set<Int>()
    /// Acknowledged devices by vendor, so that a move stays within the account's vendor.
    private var devicesByVendor: [[Int]]
    /// Names accounts `load-<seed>-<number>`, so that runs with other seeds never share one.
    private let accountPrefix: String
    /// Units generated, by the kind actually generated (a known-device kind falls back to a
    /// first install until some device has been acknowledged); kinds never generated are absent.
    public var generated: [WorkloadKind: UInt64] {
        var counts = [WorkloadKind: UInt64]()
        for kind in WorkloadKind.allCases where generatedCounts[kind.index] > 0 { counts[kind] = generatedCounts[kind.index] }
        return counts
    }
    /// ``generated`` by ``WorkloadKind/index``: counted for every unit, and a dictionary keyed by
    /// the kind hashed its name each time (2.5% of the generator's CPU).
    private var generatedCounts = [UInt64](repeating: 0, count: WorkloadKind.allCases.count)
    /// Concurrent-siblings pairs acknowledged, and those whose two callers got different IDs.
    public private(set) var pairs: UInt64 = 0
    public private(set) var divergentPairs: UInt64 = 0
    /// Known-device registrations answered with an ID other than the one the device was given.
    public private(set) var unexpectedAnswers: UInt64 = 0

    public init(mix: WorkloadMix, catalogue: LoadCatalogue, seed: UInt64, trackDevices: Bool) {
        self.mix = mix
        self.catalogue = catalogue
        self.random = SplitMix64(seed: seed)
        self.tracksDevices = trackDevices || mix.needsKnownDevices
        devicesByVendor = Array(repeating: [], count: catalogue.vendors)
        accountPrefix = "load-\(seed)-"
    }

    /// A bound account with nothing in flight, found by a few random tries; nil when none is.
    private mutating func idleBoundAccount() -> Int? {
        guard !accounts.isEmpty else { return nil }
        for _ in 0..<8 {
            let index = Int.random(in: 0..<accounts.count, using: &random)
            if accounts[index].device != nil, !busyAccounts.contains(index) { return index }
        }
        return nil
    }

    /// A random version-4 UUID from the seeded stream.
    private mutating func freshUUID() -> UUID128 {
        UUID128(
            high: (random.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x4000,
            low: (random.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000)
    }

    public mutating func next() -> LoadUnit {
        var kind = mix.pick(using: &random)
        if kind.needsKnownDevice, devices.isEmpty { kind = .firstInstall }
        // A move needs an account bound and idle; until there is one, it binds a new one.
        let moved = kind == .move ? idleBoundAccount() : nil
        if kind == .move, moved == nil { kind = .bind }
        generatedCounts[kind.index] += 1
        switch kind {
        case .firstInstall:
            return LoadUnit(
                kind: kind, vendor: Int.random(in: 0..<catalogue.vendors, using: &random),
                app: Int.random(in: 0..<catalogue.appsPerVendor, using: &random), keychain: freshUUID(), idfv: freshUUID(),
                known: nil, partnerApp: nil)
        case .concurrentSiblings:
            let vendor = Int.random(in: 0..<catalogue.vendors, using: &random)
            let app = Int.random(in: 0..<catalogue.appsPerVendor, using: &random)
            let partner = catalogue.appsPerVendor == 1 ? app : (app + 1 + Int.random(in: 0..<(catalogue.appsPerVendor - 1), using: &random)) % catalogue.appsPerVendor
            return LoadUnit(
                kind: kind, vendor: vendor, app: app, keychain: freshUUID(), idfv: freshUUID(), known: nil,
                partnerApp: partner)
        case .returning, .sibling, .reinstall, .lostKeychain:
            let index = Int.random(in: 0..<devices.count, using: &random)
            let device = devices[index]
            var app = device.homeApp
            if kind == .sibling, catalogue.appsPerVendor > 1 {
                app = (app + 1 + Int.random(in: 0..<(catalogue.appsPerVendor - 1), using: &random)) % catalogue.appsPerVendor
            }
            return LoadUnit(
                kind: kind, vendor: device.vendor, app: app,
                keychain: kind == .lostKeychain ? freshUUID() : device.keychain,
                idfv: kind == .reinstall ? freshUUID() : device.idfv, known: index, partnerApp: nil)
        case .bind:
            let index = Int.random(in: 0..<devices.count, using: &random)
            let device = devices[index]
            let account = accounts.count
            accounts.append(ModelAccount(name: accountPrefix + String(account), vendor: device.vendor))
            busyAccounts.insert(account)
            return LoadUnit(
                kind: kind, vendor: device.vendor, app: device.homeApp, keychain: device.keychain, idfv: device.idfv, known: index,
                partnerApp: nil, account: account)
        case .move:
            let account = moved!
            let candidates = devicesByVendor[accounts[account].vendor]
            let index = candidates[Int.random(in: 0..<candidates.count, using: &random)]
            let device = devices[index]
            busyAccounts.insert(account)
            return LoadUnit(
                kind: kind, vendor: device.vendor, app: device.homeApp, keychain: device.keychain, idfv: device.idfv, known: index,
                partnerApp: nil, account: account)
        }
    }

    /// The requests of a ``WorkloadKind/bind`` or ``WorkloadKind/move`` unit, to be sent in order
    /// on one connection: a bind of its account to its device, or an unbind from the device the
    /// account is bound to and then that bind.
    public func bindingRequests(for unit: LoadUnit) -> [ClientBody] {
        let account = accounts[unit.account!]
        let scope = LookupRequest.Scope.vendor(catalogue.vendorName(account.vendor))
        let bind = ClientBody.bind(BindingRequest(scope: scope, account: account.name, deviceID: devices[unit.known!].deviceID.text))
        guard unit.kind == .move, let from = account.device else { return [bind] }
        return [.unbind(BindingRequest(scope: scope, account: account.name, deviceID: devices[from].deviceID.text)), bind]
    }

    /// The causal tokens of the devices a bind or a move names, merged: a node that has not yet
    /// heard of a device registered through another node waits for it rather than answer
    /// NOT_FOUND (`--causal-tokens`).
    public func bindingToken(for unit: LoadUnit) -> CausalToken {
        var token = devices[unit.known!].token
        if unit.kind == .move, let from = accounts[unit.account!].device { token.merge(devices[from].token) }
        return token
    }

    /// Records how a bind or a move was answered: its account is bound to the unit's device when
    /// every request succeeded; otherwise the run no longer knows where it is (a move may have
    /// unbound it without binding it again), and it is neither moved nor verified again.
    public mutating func settle(_ unit: LoadUnit, succeeded: Bool) {
        guard let account = unit.account else { return }
        busyAccounts.remove(account)
        accounts[account].device = succeeded ? unit.known : nil
    }

    /// Records the registry's answer to a unit. `partnerID` is the second answer of a pair;
    /// `token` the causal token of the answer (of both answers, merged, for a pair).
    public mutating func acknowledge(_ unit: LoadUnit, deviceID: UUID128, partnerID: UUID128? = nil, token: CausalToken = .empty) {
        if let partnerID {
            pairs += 1
            if partnerID != deviceID { divergentPairs += 1 }
        }
        guard tracksDevices else { return }
        if let known = unit.known, !devices[known].accepts(deviceID) { unexpectedAnswers += 1 }
        switch unit.kind {
        case .firstInstall, .concurrentSiblings:
            devicesByVendor[unit.vendor].append(devices.count)
            devices.append(
                ModelDevice(
                    vendor: unit.vendor, homeApp: unit.app, keychain: unit.keychain, idfv: unit.idfv, deviceID: deviceID,
                    otherID: partnerID.flatMap { $0 == deviceID ? nil : $0 }, token: token))
        case .reinstall:
            let index = unit.known!
            if devices[index].idfv != unit.idfv {
                devices[index].replaced.append(Identifier(kind: .idfv, value: devices[index].idfv))
                devices[index].idfv = unit.idfv
            }
        case .lostKeychain:
            let index = unit.known!
            if devices[index].keychain != unit.keychain {
                devices[index].replaced.append(Identifier(kind: .keychain, value: devices[index].keychain))
                devices[index].keychain = unit.keychain
            }
        case .returning, .sibling, .bind, .move:
            break
        }
        // Merged, not replaced: two registrations of one device may be in flight at once, each
        // answered by a node that had not yet seen the other's write.
        if let known = unit.known { devices[known].token.merge(token) }
    }
}
