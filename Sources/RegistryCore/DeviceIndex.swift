/// 32 bits of a key's keyed hash, standing for the key in a ``HashIndex`` whose values name
/// where the whole key is kept: a bucket of 8 bytes instead of the key's own size and the value.
/// Equal tags do not mean equal keys; the index's user tells them apart by value.
struct HashTag: HashIndexKey {
    let bits: UInt32

    /// The bits are a hash already: they place the entry as they are, as the high word that
    /// ``BucketTable`` places by (a ``DeviceIndex`` holds at most 2^31 entries, so its tables
    /// have at most 2^32 buckets, and the tag's high bits choose among them).
    func hash(seed: UInt64) -> UInt64 { UInt64(bits) << 32 }

    static var isWholeKey: Bool { false }
}

/// Device ID to slot number, the registry's device index: a ``HashIndex`` of ``HashTag``s,
/// whose lookups compare the whole ID with the one the candidate slot holds. The slots hold every
/// ID already, so the index keeps 8 bytes a bucket where the ID and slot took 24: at 10M devices
/// in 16M buckets, 128 MiB instead of 384 (docs/performance.md, "The device index").
///
/// A probe meets an entry of another ID with the same tag (the same home bucket and the same
/// remaining bits) about once in 2^(32 - log2(buckets)) (1 in 256 at 16M buckets; 1 in 2 near
/// 2^31 devices), which then reads one more slot.
struct DeviceIndex: Sendable {
    private var tags: HashIndex<HashTag>
    private let seed: UInt64

    init(capacity: Int = HashIndex<HashTag>.minimumCapacity, seed: UInt64 = .random(in: .min ... .max), allocator: any TableAllocator = HeapTableAllocator()) {
        tags = HashIndex(capacity: capacity, seed: 0, allocator: allocator)
        self.seed = seed
    }

    /// See ``HashIndex/capacity(holding:)``.
    static func capacity(holding devices: Int) -> Int { HashIndex<HashTag>.capacity(holding: devices) }

    /// See ``HashIndex/tableBytes(holding:)``.
    static func tableBytes(holding devices: Int) -> Int { HashIndex<HashTag>.tableBytes(holding: devices) }

    private func tag(_ id: UUID128) -> HashTag { HashTag(bits: UInt32(truncatingIfNeeded: id.hash(seed: seed))) }

    /// The slot of `id`, whose ID `idOf` reads.
    @inline(__always)
    func slot(of id: UUID128, idOf: (UInt32) -> UUID128) -> UInt32? {
        tags.value(for: tag(id), where: { idOf($0) == id })
    }

    /// The most entries: a tag places an entry in at most 2^32 buckets.
    static let maximumCount = 1 << 31

    /// Indexes slot `number`, which holds `id`, an ID the index does not hold.
    mutating func insert(_ id: UUID128, slot number: UInt32) {
        precondition(tags.count < Self.maximumCount, "the device index holds at most 2^31 devices")
        tags.insertNew(tag(id), number)
    }

    /// See ``HashIndex/touch(_:)``.
    func touch(_ ids: [UUID128]) -> UInt32 { tags.touch(ids.map(tag)) }

    /// See ``HashIndex/prefetch(_:)``.
    func prefetch(_ id: UUID128) { tags.prefetch(tag(id)) }

    /// See ``HashIndex/dropPagesInForkedChild()``.
    func dropPagesInForkedChild() { tags.dropPagesInForkedChild() }

    /// See ``HashIndex/isMovingEntries``.
    var isMovingEntries: Bool { tags.isMovingEntries }

    /// Buckets in the current table.
    var capacity: Int { tags.capacity }

    /// See ``HashIndex/reserve(holding:)``.
    @discardableResult
    mutating func reserve(holding devices: Int) -> Bool { tags.reserve(holding: devices) }

    /// Devices indexed.
    var count: Int { tags.count }
}
