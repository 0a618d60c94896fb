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
        return restorer.finish()
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
        let a = DeviceRef(id: DeviceID(UUID128(high: 1, low: 1)), created: HLCTimestamp(millis: 1, counter: 0), origin: NodeID(trusted: "n"), vendor: vendor)
        let b = DeviceRef(id: DeviceID(UUID128(high: 1, low: 2)), created: HLCTimestamp(millis: 2, counter: 0), origin: NodeID(trusted: "n"), vendor: vendor)
        let c = DeviceRef(id: DeviceID(UUID128(high: 1, low: 3)), created: HLCTimestamp(millis: 3, counter: 0), origin: NodeID(trusted: "n"), vendor: vendor)
        let idfv = Identifier(kind: .idfv, value: UUID128(high: 5, low: 5))
        let cases: [[SnapshotRecord]] = [
            [.device(a), .device(a)],
            [.device(a), .alias(1, of: 0)],
            [.device(a), .device(b), .device(c), .alias(1, of: 0), .alias(2, of: 1)],
            [.device(a), .alias(0, of: 0)],
            [.device(a), .claim(vendor: vendor, identifier: idfv, owner: 0), .claim(vendor: vendor, identifier: idfv, owner: 0)],
            [.device(a), .claim(vendor: Vendor(trusted: "org.w"), identifier: idfv, owner: 0)],
            [.device(a), .claim(vendor: vendor, identifier: idfv, owner: 0), .device(b)],
            [.device(a), .device(b), .alias(1, of: 0), .app(device: 1, bundle: try BundleID(parsing: "com.v.a"), first: .zero, last: .zero)],
            [.device(a), .claim(vendor: vendor, identifier: idfv, owner: 7)],
        ]
        for records in cases {
            #expect(throws: SnapshotRestoreError.self, "\(records)") { _ = try restore(records) }
        }
    }
}
