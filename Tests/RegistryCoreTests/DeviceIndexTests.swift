import Testing
@testable import RegistryCore

@Suite("Device index: a hash index of tags")
struct DeviceIndexTests {
    /// An index of ``HashTag``s where many keys share a tag (12 bits of the key: about a
    /// thousand pairs of equal tags among 3,000 keys), checked against a Dictionary at every step
    /// of many incremental growths: lookups tell entries with one tag apart by value, a move into
    /// a bigger table carries every entry, and while one is under way every entry is enumerated
    /// once.
    @Test(arguments: [1 as UInt64, 2, 3])
    func entriesWithEqualTagsAreToldApartThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<HashTag>(capacity: 16, seed: 0)
        var reference = [UInt64: UInt32]()
        var keyOf = [UInt64]()  // value to key: what a slot holds
        func tag(_ key: UInt64) -> HashTag { HashTag(bits: UInt32(truncatingIfNeeded: key >> 7) & 0xFFF) }
        func lookUp(_ key: UInt64) -> UInt32? { index.value(for: tag(key), where: { keyOf[Int($0)] == key }) }
        var stepsWhileMoving = 0
        for _ in 0..<3_000 {
            let key = random.next()
            guard reference[key] == nil else { continue }
            let value = UInt32(keyOf.count)
            keyOf.append(key)
            index.insertNew(tag(key), value)
            reference[key] = value
            #expect(index.count == reference.count)
            for _ in 0..<4 {
                let probe = keyOf[Int(random.next() % UInt64(keyOf.count))]
                #expect(lookUp(probe) == reference[probe])
            }
            #expect(lookUp(random.next()) == nil)
            if index.isMoving {
                stepsWhileMoving += 1
                var seen = Set<UInt32>()
                index.forEach { key, value in
                    #expect(seen.insert(value).inserted, "an entry enumerated twice")
                    #expect(key == tag(keyOf[Int(value)]))
                }
                #expect(seen.count == reference.count)
            }
        }
        #expect(stepsWhileMoving > 100, "the moves were not seen under way")
    }

    /// The device index as the state uses it: each ID found at its slot, IDs never inserted not
    /// found, while its entries move into a bigger table and after.
    @Test func findsEveryDeviceAtItsSlot() {
        var random = SplitMix64(seed: 11)
        var index = DeviceIndex(seed: random.next())
        var ids = [UUID128]()
        var movesChecked = 0
        var wasMoving = false
        for number in 0..<50_000 {
            let id = UUID128(high: random.next(), low: random.next())
            ids.append(id)
            index.insert(id, slot: UInt32(number))
            if index.isMovingEntries && !wasMoving {
                movesChecked += 1
                for _ in 0..<1_000 {
                    let probe = Int(random.next() % UInt64(ids.count))
                    #expect(index.slot(of: ids[probe]) { ids[Int($0)] } == UInt32(probe))
                }
            }
            wasMoving = index.isMovingEntries
        }
        #expect(movesChecked >= 5)
        #expect(index.count == ids.count)
        for (number, id) in ids.enumerated() {
            #expect(index.slot(of: id) { ids[Int($0)] } == UInt32(number))
        }
        for _ in 0..<1_000 {
            #expect(index.slot(of: UUID128(high: random.next(), low: random.next())) { ids[Int($0)] } == nil)
        }
    }

    /// A snapshot that names one device twice is refused by the restorer, which asks the device
    /// index first (it only inserts).
    @Test func aSnapshotNamingADeviceTwiceIsRefused() {
        let id = DeviceID(UUID128(high: 7, low: 9))
        let device = SnapshotRecord.device(id: id, created: HLCTimestamp(rawValue: 1 << 20), origin: 0, vendor: 0)
        let other = SnapshotRecord.device(id: DeviceID(UUID128(high: 8, low: 9)), created: HLCTimestamp(rawValue: 1 << 20), origin: 0, vendor: 0)
        var restorer = RegistryState.Restorer()
        #expect(throws: SnapshotRestoreError("device \(id) appears twice")) {
            for record in [.origin(NodeID(trusted: "node-a")), .vendor(Vendor(trusted: "com.v")), device, other, device] {
                try restorer.add(record)
            }
            _ = try restorer.finish()
        }
    }

    /// A partial key cannot be set: `set` would take another key's entry for its own.
    @Test func tagsAreOnlyInserted() async {
        await #expect(processExitsWith: .failure) {
            var index = HashIndex<HashTag>(capacity: 16, seed: 0)
            index.set(HashTag(bits: 1), 1)
        }
    }
}
