import Testing
@testable import RegistryCore

/// A state written as snapshot records and restored from them is the same state.
@Suite struct RegistrySnapshotTests {
    func records(of state: RegistryState) -> [SnapshotRecord] {
        var records = [SnapshotRecord]()
        state.forEachSnapshotRecord { records.append($0) }
        return records
    }

    func restore(_ records: [SnapshotRecord], expectedDevices: Int = 0, claimSeed: UInt64? = nil) throws -> RegistryState {
        var restorer = RegistryState.Restorer(expectedDevices: expectedDevices, claimSeed: claimSeed)
        for record in records { try restorer.add(record) }
        return try restorer.finish()
    }

    @Test(arguments: Array(1...60) as [UInt64])
    func aRestoredStateEqualsTheOriginal(seed: UInt64) throws {
        let generator = MergeConvergenceTests()
        let ops = seed % 2 == 0 ? try generator.registeredOperations(seed: seed) : generator.tiedOperations(seed: seed)
        var state = RegistryState()
        for op in ops { state.apply(op) }
        let restored = try restore(records(of: state))
        #expect(restored.snapshot() == state.snapshot(), "seed \(seed)")
        #expect(restored.aliasCount == state.aliasCount && restored.claimCount == state.claimCount)
        #expect(restored.digest == state.digest && restored.digest == restored.recomputedDigest(), "seed \(seed)")
        // The restored state goes on as the original would: the same operations again change
        // nothing, and a new one lands alike.
        var original = state
        var again = restored
        for op in ops.prefix(10) { again.apply(op) }
        #expect(again.snapshot() == state.snapshot())
        if let extra = try MergeConvergenceTests().registeredOperations(seed: seed &+ 1_000).first {
            original.apply(extra)
            again.apply(extra)
            #expect(again.snapshot() == original.snapshot())
        }
    }

    /// The claims of `state`'s snapshot records, and how far they are from their index's bucket
    /// order: how many at the start wrapped past the table's end into its first buckets, and how
    /// far the most any of the others falls behind the highest home bucket before it (each home
    /// from the index's hash and seed, apart from the index's own walk).
    func claimOrder(of state: RegistryState, seed: UInt64) -> (claims: [SnapshotRecord], wrapped: Int, furthestBehind: Int) {
        let buckets = state.indexCapacities.claims
        var homes = [Int]()
        var claims = [SnapshotRecord]()
        for record in records(of: state) {
            guard case .claim(let vendor, let identifier, _) = record else { continue }
            let key = RegistryState.ClaimKey(vendor: vendor, identifier: identifier)
            homes.append(Int(key.hash(seed: seed).multipliedFullWidth(by: UInt64(buckets)).high))
            claims.append(record)
        }
        // A probe run that wraps past the table's end puts its last entries in the first buckets,
        // among those of the first homes: within the first few hundred of the walk.
        let head = 512
        var wrapped = 0
        var highest = 0
        var furthestBehind = 0
        for (position, home) in homes.enumerated() {
            if position < head && home >= buckets / 2 {
                wrapped += 1
                continue
            }
            furthestBehind = max(furthestBehind, highest - home)
            highest = max(highest, home)
        }
        return (claims, wrapped, furthestBehind)
    }

    /// Claims come out in the order of their index's buckets, every claim once, whatever order
    /// they went in, and restored in that order into an index of the same seed they come out in
    /// it again. Linear probing puts an entry at most a probe run past its home (a few hundred
    /// buckets at 3/4 load), so in bucket order no home falls further behind the highest before
    /// it; in any other order, homes fall behind by most of the table. With seed 0xAC5 some
    /// claims wrap past the table's end (checked apart), so a second restore places a run
    /// differently: the same claims, and the same order up to a run.
    @Test(arguments: [0x5EED, 0xC0FFEE, 0xAC5] as [UInt64])
    func claimsAreWrittenInTheirIndexOrder(claimSeed: UInt64) throws {
        let devices = 12_000
        var random = SplitMix64(seed: 8)
        var input: [SnapshotRecord] = [.origin(NodeID(trusted: "n")), .vendor(Vendor(trusted: "com.v"))]
        for number in 0..<devices {
            input.append(.device(id: DeviceID(UUID128(high: 1, low: UInt64(number))), created: HLCTimestamp(millis: 1, counter: 0), origin: 0, vendor: 0))
        }
        var claims = [SnapshotRecord]()
        for index in 0..<2 * devices {
            let kind: IdentifierKind = index % 2 == 0 ? .idfv : .keychain
            let identifier = Identifier(kind: kind, value: UUID128(high: 2, low: UInt64(index)))
            claims.append(.claim(vendor: 0, identifier: identifier, owner: UInt32(index / 2)))
        }
        claims.shuffle(using: &random)
        // Sized for them: an index that grows lists an old table's entries first.
        let state = try restore(input + claims, expectedDevices: devices, claimSeed: claimSeed)
        #expect(state.claimIndexSeed == claimSeed)
        let buckets = state.indexCapacities.claims
        let first = claimOrder(of: state, seed: claimSeed)
        #expect(Set(first.claims) == Set(claims) && first.claims.count == claims.count)
        #expect(first.wrapped < buckets / 16, "more claims wrapped past the table's end than a probe run holds")
        #expect(first.furthestBehind < buckets / 16, "claims out of their buckets' order")
        if claimSeed == 0xAC5 { #expect(first.wrapped > 0, "the case of claims that wrap is not exercised") }

        let again = claimOrder(of: try restore(input + first.claims, expectedDevices: devices, claimSeed: claimSeed), seed: claimSeed)
        #expect(Set(again.claims) == Set(claims) && again.claims.count == claims.count)
        #expect(again.wrapped < buckets / 16 && again.furthestBehind < buckets / 16, "claims restored in order came out of it")
    }

    @Test func anEmptyStateRestoresEmpty() throws {
        let restored = try restore(records(of: RegistryState()))
        #expect(restored.deviceCount == 0 && restored.claimCount == 0)
    }

    @Test func recordsThatContradictEachOtherAreRefused() throws {
        let vendor = Vendor(trusted: "com.v")
        let node = NodeID(trusted: "n")
        let names: [SnapshotRecord] = [.origin(node), .vendor(vendor), .bundle(try BundleID(parsing: "com.v.a"))]
        func device(_ low: UInt64) -> SnapshotRecord {
            .device(id: DeviceID(UUID128(high: 1, low: low)), created: HLCTimestamp(millis: low, counter: 0), origin: 0, vendor: 0)
        }
        let idfv = Identifier(kind: .idfv, value: UUID128(high: 5, low: 5))
        // The same records with a valid alias restore.
        let merged = try restore(names + [device(1), device(2), .alias(1, of: 0)])
        #expect(merged.deviceCount == 1 && merged.aliasCount == 1)
        let cases: [[SnapshotRecord]] = [
            names + [device(1), device(1)],
            names + [device(1), .alias(1, of: 0)],
            names + [device(1), device(2), device(3), .alias(1, of: 0), .alias(2, of: 1)],
            // Two hops: 0 → 1, then 1 (which has an alias) → 2, each root winning its merge.
            names + [device(3), device(2), device(1), .alias(0, of: 1), .alias(1, of: 2)],
            names + [device(1), .alias(0, of: 0)],
            // The head of a merged set is its winner (the earliest created).
            names + [device(1), device(2), .alias(0, of: 1)],
            names + [device(1), .claim(vendor: 0, identifier: idfv, owner: 0), .claim(vendor: 0, identifier: idfv, owner: 0)],
            names + [device(1), .claim(vendor: 1, identifier: idfv, owner: 0)],
            names + [device(1), .claim(vendor: 0, identifier: idfv, owner: 0), device(2)],
            names + [device(1), device(2), .alias(1, of: 0), .app(device: 1, bundle: 0, first: .zero, last: .zero)],
            names + [device(1), .claim(vendor: 0, identifier: idfv, owner: 7)],
            names + [device(1), .app(device: 0, bundle: 3, first: .zero, last: .zero)],
            [.origin(node), .origin(node)],
            [.vendor(vendor), .device(id: DeviceID(UUID128(high: 1, low: 1)), created: .zero, origin: 0, vendor: 0)],
            names + [device(1), .vendor(Vendor(trusted: "org.w"))],
        ]
        for records in cases {
            #expect(throws: SnapshotRestoreError.self, "\(records)") { _ = try restore(records) }
        }
    }
}
