import Platform
import Testing
@testable import RegistryCore

@Suite("Hash index")
struct HashIndexTests {
    /// Checks the index against a Dictionary through many incremental growths, at every step.
    @Test(arguments: [1 as UInt64, 2, 3])
    func agreesWithADictionaryThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        for step in 0..<20_000 {
            // Mostly new keys, some updates of old ones.
            let key: UUID128
            if !keys.isEmpty, random.next() % 4 == 0 {
                key = keys[Int(random.next() % UInt64(keys.count))]
            } else {
                key = UUID128(high: random.next(), low: random.next())
                keys.append(key)
            }
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
                var seen = [UUID128: UInt32]()
                index.forEach { key, value in
                    #expect(seen.updateValue(value, forKey: key) == nil, "a key enumerated twice")
                }
                #expect(seen == reference)
            }
        }
        for key in keys { #expect(index.value(for: key) == reference[key]) }
    }

    /// Past a few megabytes a table lives in its own huge-page mapping (``ZeroedMemory``): the
    /// index must behave the same there, copies included.
    @Test func tablesInHugePageMappingsBehaveTheSame() {
        var random = SplitMix64(seed: 42)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next())
        var keys = [UUID128]()
        var preparedSteps = 0
        for step in 0..<150_000 {
            let key = UUID128(high: random.next(), low: random.next())
            keys.append(key)
            index.set(key, UInt32(step))
            if index.isPreparingNextTable { preparedSteps += 1 }
        }
        // The 2^17-bucket table (3 MiB) had its successor made ready from 70% to 75% load.
        #expect(preparedSteps >= (1 << 17) / 20 - 1)
        #expect(!index.isPreparingNextTable)
        #expect(index.count == keys.count)
        var copy = index
        copy.set(keys[0], 7)
        for step in stride(from: 0, to: keys.count, by: 37) {
            #expect(index.value(for: keys[step]) == UInt32(step))
        }
        #expect(index.value(for: keys[0]) == 0 && copy.value(for: keys[0]) == 7)
        #expect(index.value(for: UUID128(high: 3, low: 3)) == nil)
    }

    @Test func zeroedMemoryIsZeroAndBigBlocksStartOnAHugePage() {
        let huge = ZeroedMemory.hugePageBytes
        for bytes in [1, 4_096, huge, 3 * huge + 12_345] {
            let block = ZeroedMemory(bytes: bytes)
            let raw = block.base.assumingMemoryBound(to: UInt8.self)
            #expect(raw[0] == 0 && raw[bytes - 1] == 0 && raw[bytes / 2] == 0)
            raw[0] = 1
            raw[bytes - 1] = 2
            #expect(raw[0] == (bytes == 1 ? 2 : 1) && raw[bytes - 1] == 2)
            if bytes >= huge {
                #expect(UInt(bitPattern: block.base) % UInt(huge) == 0)
            } else {
                #expect(block.isPopulated)
            }
        }
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

    /// A big table waits for its successor's pages before switching: with the population
    /// finished the switch comes at 3/4 load, as for a small table.
    @Test func aBigTableSwitchesOnceItsSuccessorIsPopulated() throws {
        #if os(Linux)
        var random = SplitMix64(seed: 5)
        var index = HashIndex<UUID128>(capacity: 1 << 17, seed: random.next())
        let threeQuarters = (1 << 17) * 3 / 4
        for step in 0..<threeQuarters { index.set(UUID128(high: random.next(), low: random.next()), UInt32(step)) }
        #expect(index.isPreparingNextTable)
        var waited = 0
        while !index.isNextTablePopulated, waited < 500 {
            usleep(10_000)
            waited += 1
        }
        #expect(index.isNextTablePopulated)
        index.set(UUID128(high: random.next(), low: random.next()), 0)
        #expect(!index.isPreparingNextTable && index.capacity == 1 << 18)
        #endif
    }

    /// A mapped block's pages are made resident in the background, without the owner writing
    /// them; its contents stay zero; and dropping blocks while that is under way neither waits
    /// nor crashes (the population thread unmaps them).
    @Test func bigBlocksArePopulatedInTheBackground() throws {
        #if os(Linux)
        let bytes = 16 << 20
        let block = ZeroedMemory(bytes: bytes)
        var resident = [UInt8](repeating: 0, count: bytes / 4_096)
        var waited = 0
        while waited < 500 {
            guard mincore(block.base, bytes, &resident) == 0 else { break }
            if resident.allSatisfy({ $0 & 1 == 1 }), block.isPopulated { break }
            usleep(10_000)
            waited += 1
        }
        #expect(resident.allSatisfy { $0 & 1 == 1 }, "\(resident.count { $0 & 1 == 0 }) of \(resident.count) pages not resident")
        #expect(block.isPopulated)
        let raw = block.base.assumingMemoryBound(to: UInt8.self)
        #expect(stride(from: 0, to: bytes, by: 4_096).allSatisfy { raw[$0] == 0 })
        for _ in 0..<20 { _ = ZeroedMemory(bytes: 256 << 20) }
        #endif
    }

    /// The population sleeps twice each step's CPU time, and half of it once its owner waits.
    @Test func thePopulationPacesItselfLessOnceHurried() {
        #expect(BackgroundPopulation.pause(afterStepCPUNanoseconds: 4_000_000, hurried: false) == 8_000_000)
        #expect(BackgroundPopulation.pause(afterStepCPUNanoseconds: 4_000_000, hurried: true) == 2_000_000)
        #if os(Linux)
        let block = ZeroedMemory(bytes: 64 << 20)
        #expect(!block.isPopulationHurried || block.isPopulated)
        block.hurryPopulation()
        #expect(block.isPopulationHurried || block.isPopulated)
        #endif
    }

    /// The population thread names itself, so that operators can tell it from the event loop
    /// that created it (in `top -H`, `perf`, `/proc`).
    @Test func thePopulationThreadIsNamed() throws {
        #if os(Linux)
        let block = ZeroedMemory(bytes: 256 << 20)
        var seen = false
        for _ in 0..<200 where !seen && !block.isPopulated {
            seen = threadNamesOfThisProcess().contains("index-populate")
            if !seen { usleep(5_000) }
        }
        #expect(seen, "no thread named index-populate while a 256 MiB block was being populated")
        #endif
    }

    /// An index sized for n entries holds them without growing, and grows past 3/4 load as any.
    @Test(arguments: [0, 1_000, 5_000, 98_304])
    func anIndexSizedForNEntriesHoldsThemWithoutGrowing(entries: Int) {
        var random = SplitMix64(seed: UInt64(entries))
        var index = HashIndex<UUID128>(capacity: HashIndex<UUID128>.capacity(holding: entries), seed: random.next())
        let capacity = index.capacity
        #expect(capacity >= 1_024 && entries * 4 <= capacity * 3)
        for step in 0..<entries { index.set(UUID128(high: random.next(), low: random.next()), UInt32(step)) }
        #expect(index.capacity == capacity && index.count == entries)
        // Far enough past 3/4 that the switch comes even without a populated next table (7/8).
        while index.count * 8 <= capacity * 7 { index.set(UUID128(high: random.next(), low: random.next()), 0) }
        index.set(UUID128(high: random.next(), low: random.next()), 0)
        #expect(index.capacity == capacity * 2)
    }

    @Test func aRegistrySizedForNDevicesHasIndexesForThemAndTheirClaims() {
        #expect(RegistryState(expectedDevices: 50_000).indexCapacities == (1 << 17, 1 << 18))
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
