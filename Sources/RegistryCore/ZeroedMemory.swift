#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A zero-filled block of memory for a big, randomly accessed table, freed with its owner.
///
/// Blocks of at least ``hugePageBytes`` are mapped on their own, aligned to 2 MiB, and (on
/// Linux) marked for transparent huge pages. An index of millions of entries is touched at
/// random: with 4 KiB pages, filling a freshly grown table took one page fault (and, after a
/// read of the shared zero page, a TLB shootdown) per new page, thousands in a row under the
/// engine's lock, and nearly every lookup missed the TLB. With 2 MiB pages a 64 MiB table takes
/// 32 faults, and lookups mostly hit the TLB. Smaller blocks come from `calloc`.
///
/// `@unchecked Sendable`: its only mutable state, `touched`, changes in ``touchPages(_:)``,
/// which (like every write to the block) its owner calls only while it holds the block alone.
final class ZeroedMemory: @unchecked Sendable {
    static let hugePageBytes = 2 << 20
    /// The unit ``touchPages(_:)`` counts in: the smallest page, so that the touch works the same
    /// where huge pages are off.
    static let pageBytes = 4_096

    /// Addresses are kept as integers, which are `Sendable`; what the owner does with the memory
    /// is the owner's to synchronise.
    private let baseAddress: UInt
    /// The mapping to release (start address, length), when the block was mapped, not allocated.
    private let mapping: (start: UInt, length: Int)?

    /// The block's size in ``pageBytes`` pages, the last one perhaps partial.
    private let pages: Int
    /// Pages written by ``touchPages(_:)`` so far, from the start.
    private var touched = 0

    /// The block's first byte.
    var base: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: baseAddress)! }

    var untouchedPages: Int { pages - touched }

    /// Writes a zero into each of the next `count` pages, so that the kernel provides (and
    /// zeroes) them now rather than on a later, random first write.
    func touchPages(_ count: Int) {
        let end = min(touched + count, pages)
        let raw = base.assumingMemoryBound(to: UInt8.self)
        while touched < end {
            raw[touched * Self.pageBytes] = 0
            touched += 1
        }
    }

    init(bytes: Int) {
        pages = (bytes + Self.pageBytes - 1) / Self.pageBytes
        guard bytes >= Self.hugePageBytes, let mapped = Self.mapAligned(bytes: bytes) else {
            guard let memory = calloc(max(bytes, 1), 1) else { fatalError("out of memory allocating \(bytes) bytes") }
            baseAddress = UInt(bitPattern: memory)
            mapping = nil
            return
        }
        baseAddress = UInt(bitPattern: mapped.aligned)
        mapping = (UInt(bitPattern: mapped.start), mapped.length)
    }

    deinit {
        if let mapping {
            munmap(UnsafeMutableRawPointer(bitPattern: mapping.start), mapping.length)
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
