import Platform
import RegistryCore
import Synchronization

/// A zero-filled block of memory for a big, randomly accessed table, freed with its owner (a
/// mapped block a piece at a time, see ``GradualRelease``).
///
/// Blocks of at least ``hugePageBytes`` are mapped on their own, aligned to 2 MiB, and (on
/// Linux) marked for transparent huge pages. An index of millions of entries is touched at
/// random: with 4 KiB pages, filling a freshly grown table took one page fault (and, after a
/// read of the shared zero page, a TLB shootdown) per new page, thousands in a row under the
/// engine's lock, and nearly every lookup missed the TLB. With 2 MiB pages a 64 MiB table takes
/// 32 faults, and lookups mostly hit the TLB. Smaller blocks come from `calloc`.
///
/// A mapped block is also populated in the background (Linux `MADV_POPULATE_WRITE`): a thread
/// of its own, paced to a fraction of one CPU, has the kernel provide and zero its pages, and
/// ``isPopulated`` says when that is done, so that an owner can put off its first random writes
/// (each of which would otherwise fault in a page under its lock) until then. What a 2 MiB page
/// costs to fault in is in docs/architecture.md ("Memory").
///
/// `Sendable`: it holds only constants and the population's atomic state; what the owner does
/// with the memory is the owner's to synchronise.
final class ZeroedMemory: TableBlock {
    static let hugePageBytes = 2 << 20
    /// Addresses are kept as integers, which are `Sendable`; what the owner does with the memory
    /// is the owner's to synchronise.
    private let baseAddress: UInt

    /// The background population of a mapped block, which also unmaps it (see
    /// ``BackgroundPopulation/abandon()``); nil for a block from `calloc`.
    private let population: BackgroundPopulation?

    /// The block's first byte.
    var base: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: baseAddress)! }

    /// True once every page is resident: the background population has finished (or was refused,
    /// where the kernel does not offer it; pages then fault in when first written). A block from
    /// `calloc` is small and counts as populated.
    var isPopulated: Bool { population?.isFinished ?? true }

    /// The owner now waits for the pages: the background population paces itself less.
    func hurryPopulation() {
        population?.hurry()
    }

    var isReady: Bool { isPopulated }

    func hurry() { hurryPopulation() }

    /// True once ``hurryPopulation()`` was called on a block still being populated (for tests).
    var isPopulationHurried: Bool { population?.isHurried ?? false }

    /// A mapped block without background work: unmapped at once when freed.
    private let plainMapping: (start: UInt, length: Int)?

    /// `inBackground`: a mapped block is populated, and later released, on threads of its own
    /// (the serving state's tables). Without, its pages fault in as its owner writes them and it
    /// is unmapped at once when freed: for a state built off the request path (the snapshotter's),
    /// whose tables, released gradually, would pile up over consecutive snapshots.
    init(bytes: Int, inBackground: Bool = true, releaseGradually: Bool = false) {
        guard bytes >= Self.hugePageBytes, let mapped = Self.mapAligned(bytes: bytes) else {
            guard let memory = calloc(max(bytes, 1), 1) else { fatalError("out of memory allocating \(bytes) bytes") }
            baseAddress = UInt(bitPattern: memory)
            population = nil
            plainMapping = nil
            return
        }
        baseAddress = UInt(bitPattern: mapped.aligned)
        let (start, length) = (UInt(bitPattern: mapped.start), mapped.length)
        guard inBackground else {
            population = nil
            plainMapping = (start, length)
            return
        }
        plainMapping = nil
        population = BackgroundPopulation(start: baseAddress, bytes: bytes) {
            if releaseGradually {
                GradualRelease.unmap(start: start, length: length)
            } else {
                _ = munmap(UnsafeMutableRawPointer(bitPattern: start), length)
            }
        }
    }

    deinit {
        if let population {
            population.abandon()
        } else if let plainMapping {
            _ = munmap(UnsafeMutableRawPointer(bitPattern: plainMapping.start), plainMapping.length)
        } else {
            free(base)
        }
    }

    /// An anonymous mapping (zero-filled by the kernel) with room to start on a 2 MiB boundary.
    private static func mapAligned(bytes: Int) -> (start: UnsafeMutableRawPointer, aligned: UnsafeMutableRawPointer, length: Int)? {
        let length = bytes + hugePageBytes
        guard let start = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            start != MAP_FAILED
        else { return nil }
        let address = UInt(bitPattern: start)
        let alignedAddress = (address + UInt(hugePageBytes - 1)) & ~UInt(hugePageBytes - 1)
        let aligned = UnsafeMutableRawPointer(bitPattern: alignedAddress)!
        #if os(Linux)
        // Advice only: where huge pages are off, the table works the same on small pages.
        _ = madvise(aligned, bytes, MADV_HUGEPAGE)
        #endif
        return (start, aligned, length)
    }
}

/// Has the kernel provide a mapping's pages on a thread of its own (`index-populate`), so that
/// no one on the request path waits for them to be zeroed. It only asks the kernel to map pages
/// (`MADV_POPULATE_WRITE` leaves their contents alone), so it never races the owner's writes.
/// Where the call is not supported it stops at the first refusal; the pages then fault in when
/// first written.
///
/// It runs at normal priority and paces itself: after each 2 MiB step it sleeps twice the CPU
/// time the step took, so it uses at most a third of one CPU. Once its owner waits for the pages
/// (``hurry()``) it sleeps only half the step's CPU time, two thirds of a CPU. Each step holds
/// the process's memory-map lock for reading while the kernel zeroes the page, and any `mmap` or
/// `munmap` on the request path waits for it: so it must not be preempted mid-step (hence normal
/// priority), nor starve when the machine is busy (hence pacing by CPU time, not wall time).
/// docs/architecture.md ("Memory") has the measurements behind each choice.
final class BackgroundPopulation: Sendable {
    /// Bytes per `madvise` call, so that an abandoned population stops soon.
    static let chunkBytes = 2 << 20
    /// After a step, the thread sleeps this many times the CPU time the step took.
    static let pauseFactor = 2

    /// How long to sleep after a step that took `stepCPUNanoseconds` of CPU time: twice that,
    /// or half once hurried.
    static func pause(afterStepCPUNanoseconds stepCPUNanoseconds: Int, hurried: Bool) -> Int {
        hurried ? stepCPUNanoseconds / 2 : stepCPUNanoseconds * pauseFactor
    }

    private static let running = 0
    private static let finished = 1
    /// The owner is gone while the thread still runs: the thread releases the mapping.
    private static let abandoned = 2

    private let start: UInt
    private let bytes: Int
    private let state = Atomic<Int>(BackgroundPopulation.running)
    /// Set once the owner waits for the pages: the thread pauses less.
    private let hurried = Atomic<Bool>(false)
    /// Unmaps the block; called exactly once, by whichever of the owner and the thread is last.
    private let release: @Sendable () -> Void

    init(start: UInt, bytes: Int, release: @escaping @Sendable () -> Void) {
        self.start = start
        self.bytes = bytes
        self.release = release
        #if os(Linux)
        if !DetachedThread.start(named: "index-populate", { self.run() }) {
            state.store(Self.finished, ordering: .sequentiallyConsistent)
        }
        #else
        state.store(Self.finished, ordering: .sequentiallyConsistent)
        #endif
    }

    #if os(Linux)
    private func run() {
        var offset = 0
        while offset < bytes, state.load(ordering: .sequentiallyConsistent) == Self.running {
            let length = min(Self.chunkBytes, bytes - offset)
            let began = Self.threadCPUNanoseconds()
            guard madvise(UnsafeMutableRawPointer(bitPattern: start + UInt(offset)), length, MADV_POPULATE_WRITE) == 0 else { break }
            offset += length
            guard offset < bytes else { break }
            let pause = Self.pause(
                afterStepCPUNanoseconds: Self.threadCPUNanoseconds() - began, hurried: hurried.load(ordering: .relaxed))
            if pause > 0 {
                var request = timespec(tv_sec: pause / 1_000_000_000, tv_nsec: pause % 1_000_000_000)
                nanosleep(&request, nil)
            }
        }
        let (done, _) = state.compareExchange(expected: Self.running, desired: Self.finished, ordering: .sequentiallyConsistent)
        if !done { release() }
    }

    private static func threadCPUNanoseconds() -> Int { Int(SystemClock.threadCPUNanos()) }
    #endif

    /// The owner is waiting for the pages: the thread pauses less between steps.
    func hurry() {
        hurried.store(true, ordering: .relaxed)
    }

    /// True once ``hurry()`` was called.
    var isHurried: Bool { hurried.load(ordering: .relaxed) }

    /// True once the thread has stopped, having populated every page or been refused.
    var isFinished: Bool { state.load(ordering: .acquiring) == Self.finished }

    /// The owner is done with the block: it is unmapped now, or, when the thread is still in a
    /// step, by the thread as soon as that step ends. The owner never waits for the thread (it
    /// may be holding the engine's lock, and a step can take milliseconds).
    func abandon() {
        let (handedOver, _) = state.compareExchange(expected: Self.running, desired: Self.abandoned, ordering: .sequentiallyConsistent)
        if !handedOver { release() }
    }
}
