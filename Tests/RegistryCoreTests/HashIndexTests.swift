import Platform
import Synchronization
import Testing
@testable import RegistryCore

@Suite("Hash index")
struct HashIndexTests {
    /// While a move into a bigger table is under way, every key is enumerated once with its
    /// newest value, keys set again since the move began (whose old entries are shadowed) too.
    @Test func enumeratesEveryKeyOnceWhileMoving() {
        var random = SplitMix64(seed: 5)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        var stepsWhileMoving = 0
        for step in 0..<6_000 {
            let key = nextKey(&random, &keys, oldOneIn: 3)
            index.set(key, UInt32(step))
            reference[key] = UInt32(step)
            guard index.isMoving else { continue }
            stepsWhileMoving += 1
            expectEnumeratesExactly(index, reference)
        }
        #expect(stepsWhileMoving > 100, "the moves were not seen under way")
    }

    /// Checks the index against a Dictionary through many incremental growths, at every step.
    @Test(arguments: [1 as UInt64, 2, 3])
    func agreesWithADictionaryThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        for step in 0..<20_000 {
            // Mostly new keys, some updates of old ones.
            let key = nextKey(&random, &keys, oldOneIn: 4)
            let value = UInt32(step)
            #expect(index.set(key, value) == reference.updateValue(value, forKey: key))
            #expect(index.count == reference.count)
            // Lookups at every step, so that every stage of every move is seen (a key not yet
            // moved, one moved, one whose probe range wraps around the old table's end).
            for _ in 0..<4 {
                let probe = keys[Int(random.next() % UInt64(keys.count))]
                #expect(index.value(for: probe) == reference[probe])
            }
            #expect(index.value(for: UUID128(high: random.next(), low: 1)) == nil)
            if step % 1_999 == 0 {
                expectEnumeratesExactly(index, reference)
            }
        }
        for key in keys { #expect(index.value(for: key) == reference[key]) }
    }

    /// The switch to a bigger table: at 3/4 load when the next table is ready, and at 7/8
    /// whether or not it is.
    @Test func aTableSwitchesAtThreeQuartersWhenTheNextIsReadyAndAtSevenEighthsRegardless() {
        let capacity = 1 << 20
        #expect(!HashIndex<UUID128>.mustGrow(used: capacity * 3 / 4, capacity: capacity, nextTableReady: true))
        #expect(HashIndex<UUID128>.mustGrow(used: capacity * 3 / 4 + 1, capacity: capacity, nextTableReady: true))
        #expect(!HashIndex<UUID128>.mustGrow(used: capacity * 3 / 4 + 1, capacity: capacity, nextTableReady: false))
        #expect(!HashIndex<UUID128>.mustGrow(used: capacity * 7 / 8, capacity: capacity, nextTableReady: false))
        #expect(HashIndex<UUID128>.mustGrow(used: capacity * 7 / 8 + 1, capacity: capacity, nextTableReady: false))
        // Readiness is not even asked for below 3/4 (outside #expect, which evaluates every argument).
        var asked = false
        let grows = HashIndex<UUID128>.mustGrow(used: capacity / 2, capacity: capacity, nextTableReady: { asked = true; return true }())
        #expect(!grows && !asked)
    }

    /// With an allocator that prepares tables in the background, the next table is allocated
    /// from 70% load and the switch waits for it to be ready: past 3/4 the index goes on in the
    /// current table (hurrying the allocator), until 7/8 if need be.
    @Test func aTableSwitchesOnceItsSuccessorIsReady() {
        let allocator = ControlledAllocator()
        var random = SplitMix64(seed: 5)
        let capacity = 1 << 12
        var index = HashIndex<UUID128>(capacity: capacity, seed: random.next(), allocator: allocator)
        var keys = [UUID128]()
        func insert() {
            let key = UUID128(high: random.next(), low: random.next())
            keys.append(key)
            index.set(key, UInt32(keys.count - 1))
        }
        while keys.count * 10 < capacity * 7 { insert() }
        #expect(index.isPreparingNextTable && !index.isNextTableReady)
        while keys.count * 8 < capacity * 7 { insert() }
        // Past 3/4 load and not ready: still the first table, and the allocator was hurried.
        #expect(index.capacity == capacity && allocator.hurried)
        allocator.ready.withLock { $0 = true }
        insert()
        #expect(index.capacity == 2 * capacity && !index.isPreparingNextTable)
        for (value, key) in keys.enumerated() { #expect(index.value(for: key) == UInt32(value)) }
        // Never ready: the switch comes past 7/8 regardless.
        allocator.ready.withLock { $0 = false }
        while keys.count * 8 <= 2 * capacity * 7 { insert() }
        insert()
        #expect(index.capacity == 4 * capacity)
        for (value, key) in keys.enumerated() { #expect(index.value(for: key) == UInt32(value)) }
    }

    /// An index sized for n entries holds them without growing, and without making its next
    /// table ready (with an allocator that would), and grows past 3/4 load as any. Its capacity
    /// is what holds them, not the power of two above.
    @Test(arguments: [0, 1_000, 5_000, 98_304])
    func anIndexSizedForNEntriesHoldsThemWithoutGrowing(entries: Int) {
        var random = SplitMix64(seed: UInt64(entries))
        let allocator = ControlledAllocator()
        allocator.ready.withLock { $0 = true }
        var index = HashIndex<UUID128>(capacity: HashIndex<UUID128>.capacity(holding: entries), seed: random.next(), allocator: allocator)
        let capacity = index.capacity
        #expect(capacity >= 1_024 && entries * 4 <= capacity * 3)
        if entries > 1_000 { #expect(capacity < entries * 3 / 2, "sized at \(capacity) buckets for \(entries) entries") }
        for step in 0..<entries { index.set(UUID128(high: random.next(), low: random.next()), UInt32(step)) }
        #expect(index.capacity == capacity && index.count == entries && !index.isPreparingNextTable)
        index.set(UUID128(high: random.next(), low: random.next()), 0)
        if entries > 1_000 { #expect(index.isPreparingNextTable, "the next table is made ready past the entries sized for") }
        // Far enough past 3/4 that the switch comes even without a populated next table (7/8).
        while index.count * 8 <= capacity * 7 { index.set(UUID128(high: random.next(), low: random.next()), 0) }
        index.set(UUID128(high: random.next(), low: random.next()), 0)
        #expect(index.capacity == capacity * 2)
    }

    /// Reserving room for many more entries than the next table holds makes a table that holds
    /// them ready in the background while the index grows as usual, switches to it at the first
    /// insert once it is ready (at any load), and then takes them all without growing again;
    /// every key keeps its value through the moves.
    @Test func aReservedTableIsSwitchedToOnceReadyAndHoldsWhatWasReserved() {
        // Tables under 1 MiB are ready at once; bigger ones (the reserved one) when the test says.
        let allocator = ControlledAllocator(readyBelowBytes: 1 << 20)
        var random = SplitMix64(seed: 11)
        var index = HashIndex<UUID128>(capacity: 1_024, seed: random.next(), allocator: allocator)
        var keys = [UUID128]()
        func insert() {
            let key = UUID128(high: random.next(), low: random.next())
            keys.append(key)
            index.set(key, UInt32(keys.count - 1))
        }
        for _ in 0..<500 { insert() }
        let reserved = HashIndex<UUID128>.capacity(holding: 200_000)
        let acted = index.reserve(holding: 200_000)
        #expect(acted && index.isPreparingReservedTable && index.capacity == 1_024)
        // Not ready: the index grows through the small sizes as before.
        for _ in 0..<5_000 { insert() }
        #expect(index.capacity >= 8_192 && index.capacity < reserved && index.isPreparingReservedTable)
        for (value, key) in keys.enumerated() { #expect(index.value(for: key) == UInt32(value)) }
        // Ready while a doubling's move is under way: the switch waits for the move to finish.
        let small = index.capacity
        while index.capacity == small { insert() }
        #expect(index.isMoving)
        allocator.ready.withLock { $0 = true }
        insert()
        #expect(index.capacity == small * 2 && index.isMoving && index.isPreparingReservedTable)
        while index.isMoving { insert() }
        insert()
        #expect(index.capacity == reserved && index.isMoving && !index.isPreparingReservedTable)
        for (value, key) in keys.enumerated() { #expect(index.value(for: key) == UInt32(value)) }
        while keys.count < 200_000 { insert() }
        #expect(index.capacity == reserved && !index.isMoving && index.count == 200_000)
        for (value, key) in keys.enumerated() where value % 7 == 0 { #expect(index.value(for: key) == UInt32(value)) }
    }

    /// A reserved table that is never ready is given up once the index has grown as far by itself.
    @Test func aReservationIsGivenUpOnceGrowthGetsThereFirst() {
        let allocator = ControlledAllocator(readyBelowBytes: 1 << 20)
        var random = SplitMix64(seed: 12)
        var index = HashIndex<UUID128>(capacity: 1_024, seed: random.next(), allocator: allocator)
        let acted = index.reserve(holding: 50_000)
        #expect(acted && index.isPreparingReservedTable)
        var inserted = 0
        while index.isPreparingReservedTable, inserted < 200_000 {
            index.set(UUID128(high: random.next(), low: random.next()), UInt32(inserted))
            inserted += 1
        }
        #expect(!index.isPreparingReservedTable && index.capacity * 2 >= HashIndex<UUID128>.capacity(holding: 50_000))
        #expect(index.count == inserted)
    }

    /// The background path against a Dictionary, with keys set again: a reservation at a seeded
    /// step, its table ready at another, lookups at every step.
    @Test(arguments: [4 as UInt64, 5, 6])
    func aReservationMadeReadyInTheBackgroundAgreesWithADictionary(seed: UInt64) {
        let allocator = ControlledAllocator(readyBelowBytes: 64 << 10)
        var random = SplitMix64(seed: seed)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next(), allocator: allocator)
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        let reserveAt = 50 + Int(random.next() % 500)
        let readyAt = reserveAt + 1 + Int(random.next() % 3_000)
        var switched = false
        for step in 0..<16_000 {
            if step == reserveAt {
                let acted = index.reserve(holding: 16_000)
                #expect(acted && index.isPreparingReservedTable)
            }
            if step == readyAt { allocator.ready.withLock { $0 = true } }
            let key = nextKey(&random, &keys, oldOneIn: 4)
            #expect(index.set(key, UInt32(step)) == reference.updateValue(UInt32(step), forKey: key))
            for _ in 0..<2 {
                let probe = keys[Int(random.next() % UInt64(keys.count))]
                #expect(index.value(for: probe) == reference[probe])
            }
            switched = switched || index.capacity == HashIndex<UUID128>.capacity(holding: 16_000)
        }
        #expect(switched && index.count == reference.count)
        expectEnumeratesExactly(index, reference)
    }

    /// Two copies of an index share a reserved table: only one of them may write into it. The
    /// first to insert once it is ready gives it up; the other, then its only holder, switches.
    /// Both keep their own entries.
    @Test func copiesSharingAReservationDoNotBothWriteIntoIt() {
        let allocator = ControlledAllocator(readyBelowBytes: 64 << 10)
        var original = HashIndex<UUID128>(capacity: 1_024, seed: 8, allocator: allocator)
        for n in 1...100 as ClosedRange<UInt64> { original.set(UUID128(high: n, low: 0), UInt32(n)) }
        let acted = original.reserve(holding: 20_000)
        #expect(acted)
        var copy = original
        allocator.ready.withLock { $0 = true }
        copy.set(UUID128(high: 1_000, low: 1), 1_000)
        #expect(!copy.isPreparingReservedTable && copy.capacity == 1_024)
        original.set(UUID128(high: 2_000, low: 2), 2_000)
        #expect(original.capacity == HashIndex<UUID128>.capacity(holding: 20_000))
        #expect(copy.value(for: UUID128(high: 2_000, low: 2)) == nil && original.value(for: UUID128(high: 1_000, low: 1)) == nil)
        #expect(copy.value(for: UUID128(high: 1_000, low: 1)) == 1_000 && original.value(for: UUID128(high: 2_000, low: 2)) == 2_000)
        for n in 1...100 as ClosedRange<UInt64> {
            #expect(original.value(for: UUID128(high: n, low: 0)) == UInt32(n) && copy.value(for: UUID128(high: n, low: 0)) == UInt32(n))
        }
    }

    /// A state reserves each index for its own count: device records for the device index,
    /// claims for the claim index (here without background preparation: at once).
    @Test func aStateReservesEachIndexForItsOwnCount() {
        var state = RegistryState()
        let acted = state.reserve(slots: 100_000, claims: 300_000)
        #expect(acted)
        #expect(state.indexCapacities == (DeviceIndex.capacity(holding: 100_000), HashIndex<RegistryState.ClaimKey>.capacity(holding: 300_000)))
        let again = state.reserve(slots: 100_000, claims: 300_000)
        #expect(!again)
    }

    /// A reservation the next growth covers anyway changes nothing; nor does one already made.
    @Test func aReservationWithinTheNextGrowthChangesNothing() {
        let allocator = ControlledAllocator()
        var index = HashIndex<UUID128>(capacity: 4_096, seed: 3, allocator: allocator)
        let withinGrowth = index.reserve(holding: 5_000)
        #expect(!withinGrowth && !index.isPreparingReservedTable && index.capacity == 4_096)
        let beyond = index.reserve(holding: 40_000)
        let again = index.reserve(holding: 40_000)
        let less = index.reserve(holding: 30_000)
        // Only more than twice the table being made ready replaces it.
        let littleMore = index.reserve(holding: 60_000)
        let muchMore = index.reserve(holding: 200_000)
        #expect(beyond && !again && !less && !littleMore && muchMore)
    }

    /// Without background preparation the switch comes at once, and a move under way is
    /// finished first. Checked against a Dictionary at every step, with a reservation at a
    /// seeded random step, while the index may be moving into its doubled table.
    @Test(arguments: [1 as UInt64, 2, 3])
    func aReservationAgreesWithADictionary(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        let reserveAt = 100 + Int(random.next() % 2_000)
        var reservedCapacity = 0
        for step in 0..<12_000 {
            if step == reserveAt {
                let acted = index.reserve(holding: 12_000)
                #expect(acted)
                reservedCapacity = index.capacity
                #expect(reservedCapacity == HashIndex<UUID128>.capacity(holding: 12_000) && index.isMoving)
            }
            let key = nextKey(&random, &keys, oldOneIn: 4)
            #expect(index.set(key, UInt32(step)) == reference.updateValue(UInt32(step), forKey: key))
            let probe = keys[Int(random.next() % UInt64(keys.count))]
            #expect(index.value(for: probe) == reference[probe])
        }
        #expect(index.capacity == reservedCapacity && index.count == reference.count)
        expectEnumeratesExactly(index, reference)
    }

    @Test func aRegistrySizedForNDevicesHasIndexesForThemAndTheirClaims() {
        #expect(RegistryState(expectedDevices: 50_000).indexCapacities == (71_429, 142_858))
        #expect(RegistryState(expectedDevices: 0).indexCapacities == RegistryState().indexCapacities)
    }

    @Test func copiesAreIndependentAcrossGrowth() {
        var original = HashIndex<UUID128>(capacity: 16, seed: 9)
        for n in 1...10 as ClosedRange<UInt64> { original.set(UUID128(high: n, low: n), UInt32(n)) }
        var copy = original
        // Enough inserts to grow the copy (and move buckets) while the original stays as it was.
        for n in 11...100 as ClosedRange<UInt64> { copy.set(UUID128(high: n, low: n), UInt32(n)) }
        copy.set(UUID128(high: 1, low: 1), 1_000)
        #expect(original.count == 10 && copy.count == 100)
        #expect(original.value(for: UUID128(high: 1, low: 1)) == 1)
        #expect(original.value(for: UUID128(high: 50, low: 50)) == nil)
        #expect(copy.value(for: UUID128(high: 1, low: 1)) == 1_000)
        #expect(copy.value(for: UUID128(high: 50, low: 50)) == 50)
    }

    /// A ``HashTag`` whose entry starts its probe at `home` of a table of `capacity` buckets,
    /// made distinct from others with the same home by `low`, its low seven bits.
    private func placedTag(home: Int, capacity: Int, low: UInt32) -> HashTag {
        // The home is bits × capacity / 2^32: the least bits with that home, rounded up to a
        // multiple of 128, then `low` added.
        let least = (UInt64(home) << 32 + UInt64(capacity) - 1) / UInt64(capacity)
        let bits = UInt32((least + 127) / 128 * 128) | low
        precondition(BucketTable<HashTag>.home(of: HashTag(bits: bits).hash(seed: 0), capacity: capacity) == home)
        return HashTag(bits: bits)
    }

    /// A probe that starts in the last bucket wraps around to the first: entries equal in key
    /// whose cluster crosses the end are each found by value, a new key goes to the first free
    /// bucket after the cluster, and an absent key's probe ends there.
    @Test func aProbeWrapsAroundTheEnd() {
        let capacity = 20
        var index = HashIndex<HashTag>(capacity: capacity, seed: 0)
        let crowded = placedTag(home: capacity - 1, capacity: capacity, low: 5)
        // Twelve entries with one key: buckets 19, then 0 to 10.
        for value in 0..<12 as Range<UInt32> { index.insertNew(crowded, value) }
        let other = placedTag(home: 0, capacity: capacity, low: 9)
        index.insertNew(other, 100)
        #expect(index.capacity == capacity, "the table grew: the test no longer wraps a probe")
        for value in 0..<12 as Range<UInt32> {
            #expect(index.value(for: crowded, where: { $0 == value }) == value)
        }
        #expect(index.entry(atBucket: capacity - 1)?.1 == 0 && index.entry(atBucket: 0)?.1 == 1)
        #expect(index.value(for: crowded, where: { $0 == 99 }) == nil)
        #expect(index.value(for: other, where: { _ in true }) == 100)
        #expect(index.entry(atBucket: 11)?.1 == 100, "a new key goes to the first free bucket of its probe")
        #expect(index.value(for: placedTag(home: capacity - 1, capacity: capacity, low: 6), where: { _ in true }) == nil)
    }

    /// A cluster of 40 entries, longer than a cache line's buckets, in the order linear
    /// probing puts them: each is found by key and value, and a key absent from the middle of
    /// the cluster is looked for to its end.
    @Test func aLongClusterIsInProbeOrder() {
        let capacity = 64
        var index = HashIndex<HashTag>(capacity: capacity, seed: 0)
        var placed = [(HashTag, UInt32)]()
        // Every third entry shares one key; the others have two more keys between them.
        for value in 0..<40 as Range<UInt32> {
            let key = placedTag(home: 10, capacity: capacity, low: value % 3 == 0 ? 1 : 2 + value % 3)
            index.insertNew(key, value)
            placed.append((key, value))
        }
        #expect(index.capacity == capacity)
        for (key, value) in placed {
            #expect(index.value(for: key, where: { $0 == value }) == value)
        }
        // Entry `value` is in bucket 10 + value.
        for (offset, (key, value)) in placed.enumerated() {
            let entry = index.entry(atBucket: 10 + offset)
            #expect(entry?.0.bits == key.bits && entry?.1 == value)
        }
        #expect(index.value(for: placedTag(home: 10, capacity: capacity, low: 1), where: { $0 == 1_000 }) == nil)
        #expect(index.value(for: placedTag(home: 30, capacity: capacity, low: 7), where: { _ in true }) == nil)
    }

    @Test func claimKeysSeparateVendorsAndKinds() {
        var index = HashIndex<RegistryState.ClaimKey>(capacity: 16, seed: 7)
        let value = UUID128(high: 1, low: 2)
        index.set(.init(vendor: 1, identifier: Identifier(kind: .idfv, value: value)), 10)
        index.set(.init(vendor: 2, identifier: Identifier(kind: .idfv, value: value)), 20)
        index.set(.init(vendor: 1, identifier: Identifier(kind: .keychain, value: value)), 30)
        #expect(index.count == 3)
        #expect(index.value(for: .init(vendor: 2, identifier: Identifier(kind: .idfv, value: value))) == 20)
        let key = RegistryState.ClaimKey(vendor: 5, identifier: Identifier(kind: .keychain, value: value))
        #expect(key.vendor == 5 && key.kind == IdentifierKind.keychain.rawValue)
    }
}

/// Heap blocks that count as prepared in the background, whose readiness the test sets.
private final class ControlledAllocator: TableAllocator {
    let ready = Mutex(false)
    private let hurriedFlag = Mutex(false)
    var hurried: Bool { hurriedFlag.withLock { $0 } }
    /// Blocks smaller than this are ready from the start, whatever `ready` says.
    let readyBelowBytes: Int

    init(readyBelowBytes: Int = 0) {
        self.readyBelowBytes = readyBelowBytes
    }

    func zeroedBlock(bytes: Int) -> any TableBlock {
        ControlledBlock(owner: self, heap: HeapTableAllocator().zeroedBlock(bytes: bytes), alwaysReady: bytes < readyBelowBytes)
    }
    func preparesInBackground(bytes: Int) -> Bool { true }
    fileprivate func hurry() { hurriedFlag.withLock { $0 = true } }
}

private final class ControlledBlock: TableBlock {
    let owner: ControlledAllocator
    let heap: any TableBlock
    let alwaysReady: Bool
    init(owner: ControlledAllocator, heap: any TableBlock, alwaysReady: Bool) {
        self.owner = owner
        self.heap = heap
        self.alwaysReady = alwaysReady
    }
    var base: UnsafeMutableRawPointer { heap.base }
    var isReady: Bool { alwaysReady || owner.ready.withLock { $0 } }
    func hurry() { owner.hurry() }
}

/// Expects `index` to enumerate exactly `reference`'s entries, each once.
func expectEnumeratesExactly(_ index: HashIndex<UUID128>, _ reference: [UUID128: UInt32], sourceLocation: SourceLocation = #_sourceLocation) {
    var seen = [UUID128: UInt32]()
    index.forEach { key, value in
        #expect(seen.updateValue(value, forKey: key) == nil, "a key enumerated twice", sourceLocation: sourceLocation)
    }
    #expect(seen == reference, sourceLocation: sourceLocation)
}

/// The key for the next step of a seeded index test: one of `keys` again, one time in
/// `oldOneIn`, otherwise a new one, which is added to `keys`.
func nextKey(_ random: inout SplitMix64, _ keys: inout [UUID128], oldOneIn: UInt64) -> UUID128 {
    if !keys.isEmpty, random.next() % oldOneIn == 0 { return keys[Int(random.next() % UInt64(keys.count))] }
    let key = UUID128(high: random.next(), low: random.next())
    keys.append(key)
    return key
}
