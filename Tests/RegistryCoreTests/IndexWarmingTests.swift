import Testing
@testable import RegistryCore

/// ``RegistryState/warm(for:newDevices:)`` and ``HashIndex/touch(_:)`` only read and prefetch: a
/// state warmed before each batch must decide exactly what an unwarmed one does.
@Suite struct IndexWarmingTests {
    @Test func touchingKeysNeverChangesTheIndex() {
        var random = SplitMix64(seed: 3)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        let keys = (0..<200).map { _ in UUID128(high: random.next(), low: random.next()) }
        for (value, key) in keys.prefix(100).enumerated() { index.set(key, UInt32(value)) }
        _ = index.touch(keys)
        _ = index.touch([])
        #expect(index.count == 100)
        for (value, key) in keys.enumerated() { #expect(index.value(for: key) == (value < 100 ? UInt32(value) : nil)) }
    }

    /// While the index grows, touching also reads the old table and the buckets the next moves
    /// land in, up to the old table's end: none of it may change what the index holds.
    @Test(arguments: [4, 5] as [UInt64])
    func touchingKeysWhileTheIndexGrowsNeverChangesIt(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        var touchesWhileMoving = 0
        for step in 0..<6_000 {
            // Known keys and new ones, more of them than the old table has buckets left at times.
            let touched = (0..<Int(random.next() % 300)).map { _ in
                keys.isEmpty || random.next() % 2 == 0
                    ? UUID128(high: random.next(), low: random.next()) : keys[Int(random.next() % UInt64(keys.count))]
            }
            if index.isMoving { touchesWhileMoving += 1 }
            _ = index.touch(touched)
            let key = UUID128(high: random.next(), low: random.next())
            keys.append(key)
            #expect(index.set(key, UInt32(step)) == nil)
            reference[key] = UInt32(step)
        }
        #expect(touchesWhileMoving > 100, "the touches should have met moves under way")
        #expect(index.count == reference.count)
        for (key, value) in reference { #expect(index.value(for: key) == value) }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aStateWarmedBeforeEachBatchDecidesWhatAnUnwarmedOneDoes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let rules = try VendorRules()
        let node = NodeID(trusted: "node-a")
        // Few identifiers, so that batches hold returning devices, siblings and merges too.
        let identifiers = (0..<60).map { _ in UUID128(high: random.next() | 1, low: random.next()) }
        var warmed = RegistryState(expectedDevices: 100)
        var plain = RegistryState()
        var clock = HybridLogicalClock()
        for batch in 0..<40 {
            var registrations = [Registration]()
            for _ in 0..<(1 + random.next() % 12) {
                var presented = [PresentedIdentifier(rawKind: 2, text: identifiers[Int(random.next() % 60)].text)]
                if random.next() % 2 == 0 {
                    presented.append(PresentedIdentifier(rawKind: 1, text: identifiers[Int(random.next() % 60)].text))
                }
                let bundle = ["com.v.a", "com.v.b", "org.w.c"][Int(random.next() % 3)]
                registrations.append(try Registration(bundle: bundle, identifiers: presented, rules: rules))
            }
            let stamps = registrations.map { _ in clock.tick(wallMillis: UInt64(1_000 + batch)) }
            let candidates = stamps.map { DeviceID.mint(at: $0, using: &random) }
            warmed.warm(for: registrations, newDevices: candidates)
            for (index, registration) in registrations.enumerated() {
                let fromWarmed = warmed.register(registration, at: stamps[index], origin: node) { _ in candidates[index] }
                let fromPlain = plain.register(registration, at: stamps[index], origin: node) { _ in candidates[index] }
                #expect(fromWarmed.operation == fromPlain.operation)
                #expect(fromWarmed.outcome == fromPlain.outcome)
            }
        }
        #expect(warmed.snapshot() == plain.snapshot())
        #expect(warmed.aliasCount > 0, "the batches should have merged some devices")
    }
}
