import CLinuxFile

/// Software prefetching: a code path that knows which memory it will touch a little later asks
/// the CPU to start fetching it now, so that the wait for memory overlaps other work.
public enum Prefetch {
    /// Asks for the cache line at `address`, to be written; a hint, which cannot fault.
    @inlinable
    public static func forWriting(_ address: UnsafeRawPointer) {
        registry_prefetch_for_writing(address)
    }
}
