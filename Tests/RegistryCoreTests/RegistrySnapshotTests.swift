import Testing
@testable import RegistryCore

/// A state written as snapshot records and restored from them is the same state.
@Suite struct RegistrySnapshotTests {
    func records(of state: RegistryState) -> [SnapshotRecord] {
        var records = [SnapshotRecord]()
        state.forEachSnapshotRecord { records.append($0) }
        return records
    }

    func restore(_ records: [SnapshotRecord]) throws -> RegistryState {
        var restorer = RegistryState.Restorer()
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

    /// Claims come out grouped by owner, a group of 4,096 owners after another (what a restore
    /// reads the owners' slots by), every claim once, whatever order they went in.
    @Test func claimsAreWrittenGroupedByOwner() throws {
        let devices: Int = (3 << RegistryState.claimOwnerGroupBits) + 100
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
        let state = try restore(input + claims)
        var groups = [Int]()
        var written = [SnapshotRecord]()
        for record in records(of: state) {
            guard case .claim(_, _, let owner) = record else { continue }
            groups.append(Int(owner) >> RegistryState.claimOwnerGroupBits)
            written.append(record)
        }
        #expect(groups == groups.sorted() && Set(groups).count == 4)
        #expect(Set(written) == Set(claims) && written.count == claims.count)
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
        let cases: [[SnapshotRecord]] = [
            names + [device(1), device(1)],
            names + [device(1), .alias(1, of: 0)],
            names + [device(1), device(2), device(3), .alias(1, of: 0), .alias(2, of: 1)],
            names + [device(1), .alias(0, of: 0)],
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
