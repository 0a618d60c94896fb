/// An index from a key to the numbers of the records that hold it, keeping only the numbers:
/// 4 bytes a bucket, where a map that kept its keys would take 24 for a 20-byte key. The owner
/// keeps the records; it gives the hash of the key it looks for, a test of whether a record holds
/// that key, and, to grow or delete, the hash of any record's key.
///
/// Open addressing with linear probing, at most 3/4 full; a key may have any number of records
/// (a multimap), found together in its probe run. Deletion shifts the entries after it back
/// (no tombstones), so a lookup still stops at the first empty bucket.
///
/// Growing moves the entries into a table twice the size a few clusters at a time, on each
/// insert, as ``HashIndex`` does: moving every entry at once reads every record at random, all
/// under the engine's lock (docs/performance.md, "Binding tables", has what that cost). The old table is emptied whole clusters at a time, starting after an empty bucket,
/// so what is left of it is whole clusters, and a lookup probes what is left of the old table,
/// then the new one. Tables are `calloc`ed (``WordTable``), so a new one costs no time to zero:
/// its pages are faulted in by the inserts that reach them.
///
/// A value type: copies share tables until one of them writes (copy on write).
struct RecordIndex: Sendable {
    /// Record number plus one; 0 is empty. A power of two long.
    private var buckets: WordTable
    /// The table being emptied into `buckets` while growing (empty otherwise), the bucket the
    /// move goes on from, and how many of its buckets are still to be visited.
    private var old: WordTable
    private var cursor = 0
    private var unvisited = 0
    /// Entries held.
    private(set) var count = 0

    init() {
        buckets = WordTable(count: 16)
        old = WordTable(count: 0)
    }

    /// Buckets held (for tests and measurements), the old table's while growing included.
    var capacity: Int { buckets.count + old.count }

    /// Makes the tables this value writes its own (see the type's notes).
    private mutating func ownTables() {
        if !isKnownUniquelyReferenced(&buckets) { buckets = buckets.copy() }
        if !isKnownUniquelyReferenced(&old) { old = old.copy() }
    }

    /// Whether entries are being moved into a bigger table (for tests).
    var isGrowing: Bool { unvisited > 0 }

    /// Old buckets visited per insert while growing, at least (each visit also finishes the
    /// cluster it ends in): 2 would empty the old table just before the new one needs to grow.
    static var visitsPerInsert: Int { 4 }

    /// Calls `body` with every record whose key `matches` accepts, among those probed from
    /// `hash`'s bucket.
    func forEach(hash: UInt64, matching matches: (UInt32) -> Bool, _ body: (UInt32) -> Void) {
        if isGrowing { Self.probe(old, hash: hash, matching: matches, body) }
        Self.probe(buckets, hash: hash, matching: matches, body)
    }

    private static func probe(_ table: WordTable, hash: UInt64, matching matches: (UInt32) -> Bool, _ body: (UInt32) -> Void) {
        let (words, mask) = (table.words, table.count - 1)
        var bucket = Int(truncatingIfNeeded: hash) & mask
        while words[bucket] != 0 {
            let record = words[bucket] - 1
            if matches(record) { body(record) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Adds `record`, whose key hashes to `hash`. `rehash` gives any held record's key hash, for
    /// growing.
    mutating func insert(_ record: UInt32, hash: UInt64, rehash: (UInt32) -> UInt64) {
        precondition(record < UInt32.max, "record numbers are below 2^32 - 1")
        ownTables()
        if isGrowing {
            moveSome(rehash: rehash, all: false)
        } else if (count + 1) * 4 > buckets.count * 3 {
            startGrowing()
            moveSome(rehash: rehash, all: false)
        }
        Self.place(record, hash: hash, in: buckets)
        count += 1
    }

    /// Removes `record`, whose key hashes to `hash`; false when it is not held. Removals are
    /// rare (a device forgotten): one made while growing first finishes the move.
    @discardableResult
    mutating func remove(_ record: UInt32, hash: UInt64, rehash: (UInt32) -> UInt64) -> Bool {
        ownTables()
        if isGrowing { moveSome(rehash: rehash, all: true) }
        let (buckets, mask) = (buckets.words, buckets.count - 1)
        var bucket = Int(truncatingIfNeeded: hash) & mask
        while buckets[bucket] != record + 1 {
            if buckets[bucket] == 0 { return false }
            bucket = (bucket + 1) & mask
        }
        // Backward shift: move each later entry of the run into the hole when its home bucket
        // does not lie (cyclically) after the hole, so that every entry stays reachable from its
        // home without crossing an empty bucket.
        var hole = bucket
        var next = (hole + 1) & mask
        while buckets[next] != 0 {
            let home = Int(truncatingIfNeeded: rehash(buckets[next] - 1)) & mask
            if (next - home) & mask >= (next - hole) & mask {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
        count -= 1
        return true
    }

    private static func place(_ record: UInt32, hash: UInt64, in table: WordTable) {
        let (words, mask) = (table.words, table.count - 1)
        var bucket = Int(truncatingIfNeeded: hash) & mask
        while words[bucket] != 0 { bucket = (bucket + 1) & mask }
        words[bucket] = record + 1
    }

    /// Makes a table twice the size and starts moving the current one into it, from the bucket
    /// after its first empty one (a table at most 3/4 full has one), so that what it empties is
    /// always whole clusters.
    private mutating func startGrowing() {
        old = buckets
        buckets = WordTable(count: old.count * 2)
        var empty = 0
        while old.words[empty] != 0 { empty += 1 }
        cursor = (empty + 1) & (old.count - 1)
        unvisited = old.count
    }

    /// Visits ``visitsPerInsert`` old buckets, or every one left when `all`, then the rest of the
    /// cluster the last one is in, moving their entries into the new table.
    private mutating func moveSome(rehash: (UInt32) -> UInt64, all: Bool) {
        let (words, mask) = (old.words, old.count - 1)
        var budget = all ? unvisited : Self.visitsPerInsert
        while unvisited > 0, budget > 0 || words[cursor] != 0 {
            let stored = words[cursor]
            if stored != 0 {
                Self.place(stored - 1, hash: rehash(stored - 1), in: buckets)
                words[cursor] = 0
            }
            cursor = (cursor + 1) & mask
            unvisited -= 1
            budget -= 1
        }
        if unvisited == 0 { old = WordTable(count: 0) }
    }
}

/// `count` zero-filled 32-bit words from a ``TableAllocator`` (`calloc`: a big table's pages are
/// the kernel's zero pages until written, so making one costs no time).
///
/// `@unchecked Sendable`: the words are written only through ``RecordIndex``'s mutating
/// methods, which first copy a table that is not uniquely referenced, so a table reachable from
/// more than one value (or thread) is only ever read.
final class WordTable: @unchecked Sendable {
    let count: Int
    let words: UnsafeMutablePointer<UInt32>
    private let memory: any TableBlock

    init(count: Int, allocator: any TableAllocator = HeapTableAllocator()) {
        self.count = count
        memory = allocator.zeroedBlock(bytes: count * MemoryLayout<UInt32>.stride)
        words = memory.base.bindMemory(to: UInt32.self, capacity: max(count, 1))
    }

    func copy() -> WordTable {
        let copy = WordTable(count: count)
        copy.words.update(from: words, count: count)
        return copy
    }
}
