import Platform
import Testing
@testable import RegistryCore
@testable import RegistryServer

/// The serving node's index tables (``HugePageTableAllocator``): huge-page mappings populated in
/// the background (``ZeroedMemory``), and indexes over them.
@Suite("Table memory")
struct TableMemoryTests {
    /// Past a few megabytes a table lives in its own huge-page mapping (``ZeroedMemory``): the
    /// index must behave the same there, copies included.
    @Test func tablesInHugePageMappingsBehaveTheSame() {
        var random = SplitMix64(seed: 42)
        var index = HashIndex<UUID128>(capacity: 16, seed: random.next(), allocator: HugePageTableAllocator())
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

    /// A big table waits for its successor's pages before switching: with the population
    /// finished the switch comes at 3/4 load, as for a small table.
    @Test func aBigTableSwitchesOnceItsSuccessorIsPopulated() throws {
        #if os(Linux)
        var random = SplitMix64(seed: 5)
        var index = HashIndex<UUID128>(capacity: 1 << 17, seed: random.next(), allocator: HugePageTableAllocator())
        let threeQuarters = (1 << 17) * 3 / 4
        for step in 0..<threeQuarters { index.set(UUID128(high: random.next(), low: random.next()), UInt32(step)) }
        #expect(index.isPreparingNextTable)
        var waited = 0
        while !index.isNextTableReady, waited < 500 {
            usleep(10_000)
            waited += 1
        }
        #expect(index.isNextTableReady)
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

    /// Without background work (the snapshotter's tables), a mapped block is ready at once, the
    /// index does not prepare its next table early, and freeing the block unmaps it at once.
    @Test func blocksWithoutBackgroundWorkAreUnmappedAtOnce() throws {
        #if os(Linux)
        let allocator = HugePageTableAllocator(inBackground: false)
        let bytes = 8 << 20
        #expect(!allocator.preparesInBackground(bytes: bytes))
        var block: (any TableBlock)? = allocator.zeroedBlock(bytes: bytes)
        let base = block!.base
        #expect(block!.isReady && UInt(bitPattern: base) % UInt(ZeroedMemory.hugePageBytes) == 0)
        memset(base, 1, bytes)
        var resident = [UInt8](repeating: 0, count: 1)
        #expect(mincore(base, 4_096, &resident) == 0)
        block = nil
        #expect(mincore(base, 4_096, &resident) == -1 && errno == ENOMEM, "the block is still mapped")
        #endif
    }
}
