#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A key the registry's in-memory index can hold: plain bytes (all-zero bytes are a valid key,
/// so a zero-filled table is empty), with a keyed hash.
protocol HashIndexKey: Equatable, Sendable, BitwiseCopyable {
    func hash(seed: UInt64) -> UInt64
}

/// The map behind the registry's two big indexes (device ID to slot, claim to slot): open
/// addressing with linear probing over one flat table of buckets, values `UInt32` slot numbers,
/// no deletion.
///
/// Why not `Dictionary`: growing a dictionary rehashes every entry at once, and at a million
/// devices that held the engine's lock for a tenth of a second, which was the whole latency
/// tail. This index grows incrementally: when full it allocates a table twice the size and
/// moves a few old buckets on every insert, so no single call does more than a small, bounded
/// amount of work. The new table comes zero-filled from the kernel (``ZeroedMemory``, on huge
/// pages once it is big), so allocating it does not touch hundreds of megabytes either. The
/// kernel zeroes those pages when they are first written, which for a table of hundreds of
/// megabytes is tens of milliseconds: so from 70% load the next table is allocated early and
/// its pages are touched a few at a time on each insert, and it is ready by the time it is
/// needed at 75%.
///
/// Its hash is a keyed multiply-mix (seeded randomly per index, so clients cannot choose
/// colliding identifiers without knowing the seed), several times cheaper than SipHash on
/// 20-byte keys.
///
/// A value type: copies share tables until one of them writes (copy on write).
struct HashIndex<Key: HashIndexKey>: Sendable {
    /// Old buckets moved per insert while growing: more than the 4/3 needed to finish before
    /// the new table fills, and no more, because each move is a random write into a big table.
    /// With 8, every insert for a second after a growth cost a fifth more, enough to queue
    /// requests for that second at 70% load.
    static var migrationStep: Int { 2 }

    private var table: BucketTable<Key>
    /// The table being emptied into `table` while growing, and how far the move has got.
    private var old: BucketTable<Key>?
    private var moved = 0
    /// The next table, being made ready (see the type's notes); only for big tables.
    private var spare: BucketTable<Key>?
    private let seed: UInt64
    /// Distinct keys.
    private(set) var count = 0

    init(capacity: Int = 1024, seed: UInt64 = .random(in: .min ... .max)) {
        var size = 16
        while size < capacity { size <<= 1 }
        table = BucketTable(capacity: size)
        self.seed = seed
    }

    func value(for key: Key) -> UInt32? {
        let hash = key.hash(seed: seed)
        if let index = table.find(key, hash: hash) { return table.value(at: index) }
        if let old, let index = old.find(key, hash: hash) { return old.value(at: index) }
        return nil
    }

    /// Sets `key` to `value` and returns the value it had, nil when it is new.
    @discardableResult
    mutating func set(_ key: Key, _ value: UInt32) -> UInt32? {
        if !isKnownUniquelyReferenced(&table) { table = table.copy() }
        let hash = key.hash(seed: seed)
        if let index = table.find(key, hash: hash) {
            defer { table.setValue(value, at: index) }
            return table.value(at: index)
        }
        // A key still in the old table is shadowed by its copy here; the move skips it later.
        let previous = old.flatMap { old in old.find(key, hash: hash).map { old.value(at: $0) } }
        if previous == nil { count += 1 }
        if (table.used + 1) * 4 > table.capacity * 3 { grow() }
        table.place(key, value, hash: hash)
        moveSomeOldBuckets()
        prepareSpare()
        return previous
    }

    func forEach(_ body: (Key, UInt32) -> Void) {
        table.forEach(body)
        guard let old else { return }
        old.forEach { key, value in
            if table.find(key, hash: key.hash(seed: seed)) == nil { body(key, value) }
        }
    }

    private mutating func grow() {
        // A move still under way (which the step size makes rare) is finished first.
        while old != nil { moveSomeOldBuckets(all: true) }
        old = table
        moved = 0
        if spare != nil, isKnownUniquelyReferenced(&spare), spare!.capacity == table.capacity * 2 {
            table = spare!
        } else {
            table = BucketTable(capacity: table.capacity * 2)
        }
        spare = nil
    }

    /// Load at which the next table starts being made ready, as a fraction over 10.
    static var spareFromTenths: Int { 7 }

    /// From 70% load, allocates the next table and touches as many of its pages as will have
    /// them all written by 75% load, so no single insert pays for zeroing more than a few.
    private mutating func prepareSpare() {
        guard old == nil, table.used * 10 >= table.capacity * Self.spareFromTenths,
            table.capacity * 2 * MemoryLayout<BucketTable<Key>.Bucket>.stride >= ZeroedMemory.hugePageBytes
        else { return }
        // A copy of this index may share the spare: then this one makes its own.
        if spare == nil || !isKnownUniquelyReferenced(&spare) { spare = BucketTable(capacity: table.capacity * 2) }
        let insertsLeft = max(1, table.capacity * 3 / 4 - table.used)
        spare!.touchPages((spare!.untouchedPages + insertsLeft - 1) / insertsLeft)
    }

    /// True while a next table is being made ready (for tests).
    var isPreparingNextTable: Bool { spare != nil }

    private mutating func moveSomeOldBuckets(all: Bool = false) {
        guard let source = old else { return }
        let end = all ? source.capacity : min(source.capacity, moved + Self.migrationStep)
        for index in moved..<end {
            guard let (key, value) = source.entry(at: index) else { continue }
            let hash = key.hash(seed: seed)
            if table.find(key, hash: hash) == nil { table.place(key, value, hash: hash) }
        }
        moved = end
        if moved == source.capacity { old = nil }
    }
}

/// One open-addressing table: `capacity` (a power of two) buckets in ``ZeroedMemory``.
/// A bucket's stored word is its value plus one, so zero means free.
///
/// `@unchecked Sendable`: the memory is written only through ``HashIndex``'s mutating methods,
/// which first copy a table that is not uniquely referenced, so a table reachable from more
/// than one value (or thread) is only ever read.
final class BucketTable<Key: HashIndexKey>: @unchecked Sendable {
    struct Bucket {
        var key: Key
        /// Value + 1; 0 when the bucket is free.
        var stored: UInt32
    }

    let capacity: Int
    private(set) var used = 0
    private let memory: ZeroedMemory
    private let buckets: UnsafeMutablePointer<Bucket>

    init(capacity: Int) {
        precondition(capacity > 0 && capacity & (capacity - 1) == 0, "capacity must be a power of two")
        self.capacity = capacity
        memory = ZeroedMemory(bytes: capacity * MemoryLayout<Bucket>.stride)
        buckets = memory.base.bindMemory(to: Bucket.self, capacity: capacity)
    }

    func copy() -> BucketTable {
        let copy = BucketTable(capacity: capacity)
        copy.buckets.update(from: buckets, count: capacity)
        copy.used = used
        return copy
    }

    func find(_ key: Key, hash: UInt64) -> Int? {
        let mask = capacity - 1
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let bucket = buckets[index]
            if bucket.stored == 0 { return nil }
            if bucket.key == key { return index }
            index = (index + 1) & mask
        }
    }

    func value(at index: Int) -> UInt32 { buckets[index].stored - 1 }

    /// Pages of the table not yet written by ``touchPages(_:)``.
    var untouchedPages: Int { memory.untouchedPages }

    /// Has the kernel provide the next `count` pages now (see ``ZeroedMemory/touchPages(_:)``).
    func touchPages(_ count: Int) { memory.touchPages(count) }

    func setValue(_ value: UInt32, at index: Int) {
        precondition(value < .max, "UInt32.max cannot be stored")
        buckets[index].stored = value + 1
    }

    /// Stores a key known to be absent in the first free bucket of its probe sequence.
    func place(_ key: Key, _ value: UInt32, hash: UInt64) {
        precondition(value < .max, "UInt32.max cannot be stored")
        let mask = capacity - 1
        var index = Int(truncatingIfNeeded: hash) & mask
        while buckets[index].stored != 0 { index = (index + 1) & mask }
        buckets[index] = Bucket(key: key, stored: value + 1)
        used += 1
    }

    func entry(at index: Int) -> (Key, UInt32)? {
        let bucket = buckets[index]
        return bucket.stored == 0 ? nil : (bucket.key, bucket.stored - 1)
    }

    func forEach(_ body: (Key, UInt32) -> Void) {
        for index in 0..<capacity {
            if let (key, value) = entry(at: index) { body(key, value) }
        }
    }
}

/// wyhash's folded 128-bit multiply: the high and low halves of `a × b`, xored.
@inline(__always)
func foldedMultiply(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let product = a.multipliedFullWidth(by: b)
    return product.high ^ product.low
}

extension UUID128: HashIndexKey {
    func hash(seed: UInt64) -> UInt64 {
        foldedMultiply(high ^ seed ^ 0xA076_1D64_78BD_642F, low ^ 0xE703_7ED1_A0B4_28DB)
    }
}
