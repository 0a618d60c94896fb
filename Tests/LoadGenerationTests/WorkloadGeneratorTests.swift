import RegistryCore
import LoadGeneration
import RegistryWire
import Testing

@Suite("Workload generator")
struct WorkloadGeneratorTests {
    let catalogue = LoadCatalogue(vendors: 5, appsPerVendor: 3)

    /// Acknowledges every unit with a device ID derived from its identifiers, as one node would.
    private func drive(_ generator: inout WorkloadGenerator, units: Int) -> [LoadUnit] {
        var produced = [LoadUnit]()
        var ids = [UUID128: UUID128]()
        for _ in 0..<units {
            let unit = generator.next()
            produced.append(unit)
            if unit.kind.isBinding {
                generator.settle(unit, succeeded: true)
                continue
            }
            let id: UUID128
            if let known = unit.known {
                id = generator.devices[known].deviceID
            } else {
                id = ids[unit.keychain] ?? UUID128(high: unit.keychain.low, low: unit.keychain.high)
                ids[unit.keychain] = id
            }
            generator.acknowledge(unit, deviceID: id, partnerID: unit.partnerApp == nil ? nil : id)
        }
        return produced
    }

    /// A device keeps the causal token of its creation, and a later answer's token joins it
    /// (two registrations of one device may be answered by nodes that had not seen each other's).
    @Test func aDeviceKeepsItsAnswersTokensMerged() throws {
        var generator = WorkloadGenerator(mix: try WorkloadMix(parsing: "returning"), catalogue: catalogue, seed: 1, trackDevices: true)
        let created = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 4)])
        let first = generator.next()
        generator.acknowledge(first, deviceID: UUID128(high: 1, low: 1), token: created)
        #expect(generator.devices[0].token == created)
        let (second, third) = (generator.next(), generator.next())
        let fromB = CausalToken(positions: [LogPosition(origin: "node-b", epoch: 1, sequence: 9)])
        let fromA = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 6)])
        generator.acknowledge(second, deviceID: UUID128(high: 1, low: 1), token: fromB)
        generator.acknowledge(third, deviceID: UUID128(high: 1, low: 1), token: fromA)
        #expect(generator.devices[0].token == fromA.merging(fromB) && generator.unexpectedAnswers == 0)
    }

    @Test func theSameSeedGivesTheSameUnits() throws {
        let mix = try WorkloadMix(
            parsing: "first-install=40,returning=20,sibling=10,reinstall=10,lost-keychain=10,concurrent-siblings=10,bind=5,move=5")
        var first = WorkloadGenerator(mix: mix, catalogue: catalogue, seed: 42, trackDevices: false)
        var second = WorkloadGenerator(mix: mix, catalogue: catalogue, seed: 42, trackDevices: false)
        var other = WorkloadGenerator(mix: mix, catalogue: catalogue, seed: 43, trackDevices: false)
        let a = drive(&first, units: 500).map { "\($0.kind)/\($0.vendor)/\($0.app)/\($0.keychain)/\($0.idfv)" }
        let b = drive(&second, units: 500).map { "\($0.kind)/\($0.vendor)/\($0.app)/\($0.keychain)/\($0.idfv)" }
        let c = drive(&other, units: 500).map { "\($0.kind)/\($0.vendor)/\($0.app)/\($0.keychain)/\($0.idfv)" }
        #expect(a == b)
        #expect(a != c)
        #expect(first.generated == second.generated)
        #expect(Set(first.generated.keys) == Set(WorkloadKind.allCases))
        #expect(first.generated.values.reduce(0, +) == 500)
    }

    @Test func kindsAreCountedAndOrderedByTheirPlaceInAllCases() throws {
        #expect(WorkloadKind.allCases.map(\.index) == Array(WorkloadKind.allCases.indices))
        #expect(WorkloadKind.allCases.sorted() == WorkloadKind.allCases)
        var generator = WorkloadGenerator(
            mix: try WorkloadMix(parsing: "first-install=1,sibling=1"), catalogue: catalogue, seed: 3, trackDevices: false)
        _ = drive(&generator, units: 200)
        let counts = generator.generated
        #expect(Set(counts.keys) == [.firstInstall, .sibling])
        #expect(counts.values.reduce(0, +) == 200)
    }

    @Test func knownDeviceKindsFallBackToFirstInstallsUntilADeviceIsAcknowledged() throws {
        var generator = WorkloadGenerator(
            mix: try WorkloadMix(parsing: "returning"), catalogue: catalogue, seed: 1, trackDevices: false)
        let unit = generator.next()
        #expect(unit.kind == .firstInstall)
        generator.acknowledge(unit, deviceID: UUID128(high: 1, low: 1))
        let next = generator.next()
        #expect(next.kind == .returning)
        #expect(next.known == 0)
        #expect(next.keychain == unit.keychain && next.idfv == unit.idfv && next.app == unit.app)
    }

    @Test func eachKindPresentsTheIdentifiersItsScenarioHas() throws {
        let base = WorkloadGenerator(mix: try WorkloadMix(parsing: "first-install"), catalogue: catalogue, seed: 9, trackDevices: true)
        var seeded = base
        let install = seeded.next()
        seeded.acknowledge(install, deviceID: UUID128(high: 7, low: 7))
        let device = seeded.devices[0]

        func one(_ kind: String) throws -> (LoadUnit, WorkloadGenerator) {
            var generator = WorkloadGenerator(mix: try WorkloadMix(parsing: kind), catalogue: catalogue, seed: 9, trackDevices: true)
            let first = generator.next()
            generator.acknowledge(first, deviceID: UUID128(high: 7, low: 7))
            return (generator.next(), generator)
        }
        let (sibling, _) = try one("sibling")
        #expect(sibling.kind == .sibling && sibling.app != device.homeApp && sibling.vendor == device.vendor)
        #expect(sibling.keychain == device.keychain && sibling.idfv == device.idfv)

        var (reinstall, afterReinstall) = try one("reinstall")
        #expect(reinstall.keychain == device.keychain && reinstall.idfv != device.idfv)
        afterReinstall.acknowledge(reinstall, deviceID: UUID128(high: 7, low: 7))
        #expect(afterReinstall.devices[0].idfv == reinstall.idfv)
        #expect(afterReinstall.devices[0].replaced == [Identifier(kind: .idfv, value: device.idfv)])
        #expect(afterReinstall.devices[0].claims.count == 3)
        #expect(afterReinstall.unexpectedAnswers == 0)
        reinstall = afterReinstall.next()
        afterReinstall.acknowledge(reinstall, deviceID: UUID128(high: 8, low: 8))
        #expect(afterReinstall.unexpectedAnswers == 1)

        var (lost, afterLost) = try one("lost-keychain")
        #expect(lost.keychain != device.keychain && lost.idfv == device.idfv)
        afterLost.acknowledge(lost, deviceID: UUID128(high: 7, low: 7))
        #expect(afterLost.devices[0].keychain == lost.keychain)
        lost = afterLost.next()
        #expect(lost.known == 0)
    }

    @Test func concurrentSiblingPairsUseTwoAppsOfOneVendorAndCountDivergence() throws {
        var generator = WorkloadGenerator(
            mix: try WorkloadMix(parsing: "concurrent-siblings"), catalogue: catalogue, seed: 3, trackDevices: true)
        let pair = generator.next()
        #expect(pair.registrations == 2)
        let partner = try #require(catalogue.partnerRequest(for: pair))
        let primary = catalogue.request(for: pair)
        #expect(partner.bundleID != primary.bundleID)
        #expect(partner.identifiers == primary.identifiers)
        generator.acknowledge(pair, deviceID: UUID128(high: 1, low: 1), partnerID: UUID128(high: 2, low: 2))
        #expect(generator.pairs == 1 && generator.divergentPairs == 1)
        #expect(generator.devices[0].accepts(UUID128(high: 2, low: 2)))
        #expect(!generator.devices[0].accepts(UUID128(high: 3, low: 3)))
    }

    @Test func firstInstallsAloneKeepNoModelUnlessVerifying() throws {
        var light = WorkloadGenerator(mix: try WorkloadMix(parsing: "first-install"), catalogue: catalogue, seed: 1, trackDevices: false)
        _ = drive(&light, units: 100)
        #expect(light.devices.isEmpty)
        var verifying = WorkloadGenerator(mix: try WorkloadMix(parsing: "first-install"), catalogue: catalogue, seed: 1, trackDevices: true)
        _ = drive(&verifying, units: 100)
        #expect(verifying.devices.count == 100)
    }

    @Test func bundlesFollowTheDefaultVendorRule() throws {
        let rules = try VendorRules()
        let bundle = try BundleID(parsing: catalogue.bundle(vendor: 3, app: 2))
        #expect(rules.vendor(of: bundle).name == catalogue.vendorName(3))
    }

    /// Binds make accounts on known devices; moves take an idle bound account to another device
    /// of its vendor, unbinding it from the one it is on first; an account in flight is not
    /// moved again, and one whose move failed is moved no more.
    @Test func bindsAndMovesKeepEachAccountWithinItsVendorAndWhereItWasLeft() throws {
        var generator = WorkloadGenerator(
            mix: try WorkloadMix(parsing: "first-install=20,bind=40,move=40"), catalogue: catalogue, seed: 3, trackDevices: true)
        let units = drive(&generator, units: 2_000)
        let moves = units.filter { $0.kind == .move }
        #expect(moves.count > 300 && units.filter { $0.kind == .bind }.count > 300)
        #expect(units.first?.kind == .firstInstall, "binding needs a device first")
        for account in generator.accounts {
            let device = try #require(account.device)
            #expect(generator.devices[device].vendor == account.vendor)
            #expect(account.name.hasPrefix("load-3-"))
        }
        // A move of a bound account: unbind from where it is, then bind where it goes.
        var fresh = WorkloadGenerator(mix: try WorkloadMix(parsing: "first-install=1,move=1000"), catalogue: catalogue, seed: 4, trackDevices: true)
        _ = drive(&fresh, units: 40)
        let move = fresh.next()
        guard move.kind == .move, let account = move.account, let from = fresh.accounts[account].device else {
            return #expect(Bool(false), "\(move.kind)")
        }
        let vendor = catalogue.vendorName(fresh.accounts[account].vendor)
        let requests = fresh.bindingRequests(for: move)
        #expect(
            requests == [
                .unbind(BindingRequest(scope: .vendor(vendor), account: fresh.accounts[account].name, deviceID: fresh.devices[from].deviceID.text)),
                .bind(BindingRequest(scope: .vendor(vendor), account: fresh.accounts[account].name, deviceID: fresh.devices[move.known!].deviceID.text)),
            ])
        #expect(move.registrations == 2)
        // While it is in flight it is not moved again: with every account busy, moves bind new ones.
        var inFlight = [move]
        for _ in 0..<200 { inFlight.append(fresh.next()) }
        let moved = inFlight.filter { $0.kind == .move }.compactMap(\.account)
        #expect(Set(moved).count == moved.count, "an account moved twice at once")
        // A failed move leaves the account's place unknown: it is not moved or verified again.
        fresh.settle(move, succeeded: false)
        #expect(fresh.accounts[account].device == nil)
    }

    /// A bind carries its device's causal token, a move both its devices' tokens, so that a node
    /// that has not heard of either waits for it; a failed account is moved no more.
    @Test func aMoveCarriesTheTokensOfBothItsDevicesAndAFailedAccountStays() throws {
        var generator = WorkloadGenerator(
            mix: try WorkloadMix(parsing: "first-install=1,bind=1,move=2"), catalogue: LoadCatalogue(vendors: 1, appsPerVendor: 1), seed: 9,
            trackDevices: true)
        var checkedMoves = 0
        var failed: Int?
        for _ in 0..<400 {
            let unit = generator.next()
            switch unit.kind {
            case .firstInstall:
                let index = UInt64(generator.devices.count)
                let token = CausalToken(positions: [LogPosition(origin: "node-\(index)", epoch: 1, sequence: index + 1)])
                generator.acknowledge(unit, deviceID: UUID128(high: 1, low: index), token: token)
            case .bind:
                #expect(generator.bindingToken(for: unit) == generator.devices[unit.known!].token)
                generator.settle(unit, succeeded: true)
            case .move:
                #expect(unit.account != failed, "a failed account was moved again")
                let from = try #require(generator.accounts[unit.account!].device)
                let expected = generator.devices[unit.known!].token.merging(generator.devices[from].token)
                #expect(generator.bindingToken(for: unit) == expected)
                checkedMoves += 1
                // The first move fails: the account's place is unknown from then on.
                if failed == nil {
                    failed = unit.account
                    generator.settle(unit, succeeded: false)
                } else {
                    generator.settle(unit, succeeded: true)
                }
            default:
                Issue.record("unexpected kind \(unit.kind)")
            }
        }
        #expect(checkedMoves > 50)
    }
}
