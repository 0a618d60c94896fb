import Platform

/// Where the registry's two big indexes (``HashIndex``) get the memory of their tables: one
/// zero-filled block per table, freed when the block is released.
///
/// The core asks only for zeroed memory and whether a block is ready; how it is mapped, and
/// whether threads make its pages resident ahead of use, is the allocator's business. Core code
/// uses ``HeapTableAllocator``; a running node passes one that maps big tables on huge pages and
/// populates them in the background (RegistryServer's `HugePageTableAllocator`).
public protocol TableAllocator: Sendable {
    /// A block of at least `bytes` zero bytes.
    func zeroedBlock(bytes: Int) -> any TableBlock
    /// True when a block of `bytes` becomes ready in the background (``TableBlock/isReady``
    /// starts false): an index then allocates its next table early, from 70% load, and switches
    /// to it once it is ready (see ``HashIndex``).
    func preparesInBackground(bytes: Int) -> Bool
}

/// A zero-filled block of memory from a ``TableAllocator``, freed when the last reference goes.
/// Whoever writes to it synchronises those writes; the block itself is only an address.
public protocol TableBlock: AnyObject, Sendable {
    /// The block's first byte.
    var base: UnsafeMutableRawPointer { get }
    /// True once writing to the block costs no page faults (or the allocator cannot tell).
    var isReady: Bool { get }
    /// The owner now waits for ``isReady``: whatever makes the block ready may speed up.
    func hurry()
}

/// Tables from `calloc`: ready at once, nothing in the background.
public struct HeapTableAllocator: TableAllocator {
    public init() {}

    public func zeroedBlock(bytes: Int) -> any TableBlock { HeapBlock(bytes: bytes) }

    public func preparesInBackground(bytes: Int) -> Bool { false }
}

/// A `calloc` block. `Sendable`: it holds only the address, as an integer.
private final class HeapBlock: TableBlock {
    private let address: UInt

    init(bytes: Int) {
        guard let memory = calloc(max(bytes, 1), 1) else { fatalError("out of memory allocating \(bytes) bytes") }
        address = UInt(bitPattern: memory)
    }

    deinit { free(base) }

    var base: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: address)! }
    var isReady: Bool { true }
    func hurry() {}
}
