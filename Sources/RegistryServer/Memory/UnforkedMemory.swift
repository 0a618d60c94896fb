import Platform
import RegistryCore

/// Blocks mapped on their own and kept out of a forked child (`MADV_DONTFORK` on Linux): for
/// memory a snapshot's child never reads and the parent keeps writing, the change feed's pages.
///
/// At a fork the kernel marks every page the child shares write-protected in the parent too; the
/// parent's first write to each afterwards faults, copies the page while the child lives, and
/// flushes the page's mapping from every core's TLB. A mapping the child does not get is not
/// marked. `docs/performance.md` ("Feed pages a snapshot's child does not share") has what the
/// feed's writes cost before.
struct UnforkedTableAllocator: TableAllocator {
    func zeroedBlock(bytes: Int) -> any TableBlock { UnforkedMemory(bytes: bytes) }

    func preparesInBackground(bytes: Int) -> Bool { false }
}

/// An anonymous mapping (zero-filled by the kernel), unmapped with its owner.
///
/// `Sendable`: it holds only constants (the address as an integer); what the owner does with the
/// memory is the owner's to synchronise.
final class UnforkedMemory: TableBlock {
    private let address: UInt
    private let length: Int

    init(bytes: Int) {
        let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
        length = max(pageBytes, (bytes + pageBytes - 1) / pageBytes * pageBytes)
        guard let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), mapped != MAP_FAILED else {
            fatalError("out of memory mapping \(length) bytes")
        }
        #if os(Linux)
        // Advice only: should the kernel refuse, the child shares the pages and the parent's
        // writes cost what they did before.
        _ = madvise(mapped, length, MADV_DONTFORK)
        #endif
        address = UInt(bitPattern: mapped)
    }

    deinit {
        _ = munmap(base, length)
    }

    var base: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: address)! }
    var isReady: Bool { true }
    func hurry() {}
}
