import RegistryCore

/// The tables of a serving node's indexes: blocks of 2 MiB and more are mapped on huge pages and
/// populated in the background (``ZeroedMemory``), and freed a piece at a time
/// (``GradualRelease``); smaller ones come from `calloc`. What each of those buys is measured in
/// BENCHMARKS.md ("Growing nodes"); a node sized with `--expected-devices` allocates its tables
/// once and never needs the early allocation or the gradual release.
struct HugePageTableAllocator: TableAllocator {
    func zeroedBlock(bytes: Int) -> any TableBlock { ZeroedMemory(bytes: bytes) }

    func preparesInBackground(bytes: Int) -> Bool { bytes >= ZeroedMemory.hugePageBytes }
}
