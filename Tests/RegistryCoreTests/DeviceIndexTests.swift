import Testing
@testable import RegistryCore

@Suite("Device index: a hash index of tags")
struct DeviceIndexTests {
    /// An index of ``HashTag``s where many keys share a tag (tags made of 6 bits of the key, so
    /// 64 tags for thousands of keys), checked against a Dictionary at every step of many
    /// incremental growths: lookups tell entries with one tag apart by value, and a move into a
    /// bigger table carries every entry, equal tags or not.
    @Test(arguments: [1 as UInt64, 2, 3])
    func entriesWithEqualTagsAreToldApartThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<HashTag>(capacity: 16, seed: 0)
        var reference = [UInt64: UInt32]()
        var keyOf = [UInt64]()  // value to key: what a slot holds
        func tag(_ key: UInt64) -> HashTag { HashTag(bits: UInt32(truncatingIfNeeded: key >> 7) & 0x3F) }
        func lookUp(_ key: UInt64) -> UInt32? { index.value(for: tag(key), where: { keyOf[Int($0)] == key }) }
        for step in 0..<3_000 {
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
            if step % 499 == 0 {
                var seen = Set<UInt32>()
                index.forEach { key, value in
                    #expect(seen.insert(value).inserted, "an entry enumerated twice")
                    #expect(key == tag(keyOf[Int(value)]))
                }
                #expect(seen.count == reference.count)
            }
        }
        #expect(index.capacity > 16)
    }

    /// The device index as the state uses it: each ID found at its slot, IDs never inserted not
    /// found, through growth from the smallest table.
    @Test func findsEveryDeviceAtItsSlot() {
        var random = SplitMix64(seed: 11)
        var index = DeviceIndex(seed: random.next())
        var ids = [UUID128]()
        for number in 0..<50_000 {
            let id = UUID128(high: random.next(), low: random.next())
            ids.append(id)
            index.insert(id, slot: UInt32(number))
        }
        #expect(index.count == ids.count)
        for (number, id) in ids.enumerated() {
            #expect(index.slot(of: id) { ids[Int($0)] } == UInt32(number))
        }
        for _ in 0..<1_000 {
            #expect(index.slot(of: UUID128(high: random.next(), low: random.next())) { ids[Int($0)] } == nil)
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
