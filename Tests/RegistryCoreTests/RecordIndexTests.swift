import Testing
@testable import RegistryCore

/// ``RecordIndex`` against a dictionary of sets: seeded inserts and removals, with hashes chosen
/// to collide often (runs that wrap around the table's end, many records of one key), so that
/// growth and the backward shift of removals are exercised where they can go wrong.
@Suite struct RecordIndexTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func findsExactlyTheRecordsOfAKeyThroughGrowthAndRemovals(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var keys = [UInt64]()  // record number to its key
        var live = Set<UInt32>()
        var oracle = [UInt64: Set<UInt32>]()
        var index = RecordIndex()
        // Few distinct hashes: keys share them, and a key's records share its hash.
        let hash = { (key: UInt64) -> UInt64 in (key % 13) &* 0x9E37_79B9_7F4A_7C15 | (key % 13 == 12 ? 0xF : 0) }
        for step in 0..<4_000 {
            if live.isEmpty || random.next() % 3 != 0 {
                let key = random.next() % 40
                let record = UInt32(keys.count)
                keys.append(key)
                index.insert(record, hash: hash(key)) { hash(keys[Int($0)]) }
                live.insert(record)
                oracle[key, default: []].insert(record)
            } else {
                let record = live.sorted()[Int(random.next() % UInt64(live.count))]
                let key = keys[Int(record)]
                #expect(index.remove(record, hash: hash(key)) { hash(keys[Int($0)]) })
                #expect(!index.remove(record, hash: hash(key)) { hash(keys[Int($0)]) }, "a record removed is no longer held")
                live.remove(record)
                oracle[key]?.remove(record)
            }
            if step % 97 == 0 || step == 3_999 || (index.isGrowing && step % 5 == 0) {
                for key in 0..<UInt64(40) {
                    var found = [UInt32]()
                    index.forEach(hash: hash(key), matching: { keys[Int($0)] == key }) { found.append($0) }
                    #expect(Set(found) == (oracle[key] ?? []) && found.count == Set(found).count, "seed \(seed), step \(step), key \(key)")
                }
                #expect(index.count == live.count)
            }
        }
        #expect(index.capacity >= index.count * 4 / 3)
    }

    /// Inserts alone, checked while the index moves its entries into a bigger table: what is
    /// left of the old table and the new one together hold every record, once.
    @Test(arguments: [11, 12, 13] as [UInt64])
    func lookupsWhileGrowingFindEveryRecordOnce(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var keys = [UInt64]()
        var index = RecordIndex()
        let hash = { (key: UInt64) -> UInt64 in key % 5 == 0 ? 7 : key &* 0x9E37_79B9_7F4A_7C15 }
        var checkedWhileGrowing = 0
        var oracle = [UInt64: [UInt32]]()
        for _ in 0..<3_000 {
            let key = random.next() % 500
            oracle[key, default: []].append(UInt32(keys.count))
            keys.append(key)
            index.insert(UInt32(keys.count - 1), hash: hash(key)) { hash(keys[Int($0)]) }
            guard index.isGrowing else { continue }
            checkedWhileGrowing += 1
            let probe = random.next() % 500
            var found = [UInt32]()
            index.forEach(hash: hash(probe), matching: { keys[Int($0)] == probe }) { found.append($0) }
            #expect(found.sorted() == oracle[probe] ?? [], "seed \(seed), key \(probe)")
        }
        #expect(checkedWhileGrowing > 100, "the run saw the index grow")
        #expect(index.count == keys.count)
    }

    /// A copy shares its tables until one side writes: then each keeps what it held, growth
    /// and removals included (a snapshot copies the state and writes it out while the node
    /// goes on changing its own).
    @Test func copiesDoNotSeeEachOthersChanges() {
        var keys = (0..<UInt64(100)).map { $0 % 10 }
        let hash = { (key: UInt64) -> UInt64 in key &* 0x9E37_79B9_7F4A_7C15 }
        var original = RecordIndex()
        for record in 0..<UInt32(100) { original.insert(record, hash: hash(keys[Int(record)])) { hash(keys[Int($0)]) } }
        var copy = original
        for record in 100..<UInt32(400) {
            keys.append(UInt64(record) % 10)
            copy.insert(record, hash: hash(keys[Int(record)])) { hash(keys[Int($0)]) }
        }
        copy.remove(3, hash: hash(keys[3])) { hash(keys[Int($0)]) }
        func records(_ index: RecordIndex, _ key: UInt64) -> Set<UInt32> {
            var found = Set<UInt32>()
            index.forEach(hash: hash(key), matching: { keys[Int($0)] == key }) { found.insert($0) }
            return found
        }
        #expect(original.count == 100 && copy.count == 399)
        #expect(records(original, 3) == Set((0..<UInt32(100)).filter { $0 % 10 == 3 }))
        #expect(records(copy, 3) == Set((0..<UInt32(400)).filter { $0 % 10 == 3 && $0 != 3 }))
    }
}
