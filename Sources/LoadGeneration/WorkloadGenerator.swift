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
        }
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
        case .returning, .sibling:
            break
        }
        // Merged, not replaced: two registrations of one device may be in flight at once, each
        // answered by a node that had not yet seen the other's write.
        if let known = unit.known { devices[known].token.merge(token) }
    }
}
