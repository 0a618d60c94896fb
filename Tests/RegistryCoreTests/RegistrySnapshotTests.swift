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
