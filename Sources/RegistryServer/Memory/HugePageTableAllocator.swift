import RegistryCore

/// The tables of a serving node's indexes: blocks of 2 MiB and more are mapped on huge pages and
/// populated in the background (``ZeroedMemory``), and freed a piece at a time
/// (``GradualRelease``); smaller ones come from `calloc`. What each of those buys is measured in
/// docs/architecture.md ("Memory"); a node sized with `--expected-devices` allocates its tables
/// once and never needs the early allocation or the gradual release.
///
/// `inBackground: false` keeps the huge pages but drops the threads: pages fault in as the owner
/// writes them, and a freed table is unmapped at once. For a state built off the request path
/// (the snapshotter's), which must give its memory back before the next one is built.
///
/// `package`: the benchmarks (bench/Benchmarks/BatchApplying) build a state on the tables a node's
/// state has.
package struct HugePageTableAllocator: TableAllocator {
    var inBackground = true
    /// Whether a freed table goes back to the kernel a piece at a time (``GradualRelease``)
    /// rather than at once (`--release-tables-gradually`).
    var releaseGradually = false

    /// `inBackground` and `releaseGradually`: see the type's notes and ``releaseGradually``.
    package init(inBackground: Bool = true, releaseGradually: Bool = false) {
        self.inBackground = inBackground
        self.releaseGradually = releaseGradually
    }

    package func zeroedBlock(bytes: Int) -> any TableBlock {
        ZeroedMemory(bytes: bytes, inBackground: inBackground, releaseGradually: releaseGradually)
    }

    package func preparesInBackground(bytes: Int) -> Bool { inBackground && bytes >= ZeroedMemory.hugePageBytes }
}
