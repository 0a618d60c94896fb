/// An index from a key to the numbers of the records that hold it, keeping only the numbers:
/// 4 bytes a bucket, where a map that kept its keys would take 24 for a 20-byte key. The owner
/// keeps the records; it gives the hash of the key it looks for, a test of whether a record holds
/// that key, and, to grow or delete, the hash of any record's key.
///
/// Open addressing with linear probing, at most 3/4 full; a key may have any number of records
/// (a multimap), found together in its probe run. Deletion shifts the entries after it back
/// (no tombstones), so a lookup still stops at the first empty bucket. Growing rehashes every
/// entry at once, reading each record: a pause of tens of milliseconds at ten million entries,
/// which the binding tables it serves (``AccountTable``) accept, and the registration path's
/// indexes (``HashIndex``) do not.
struct RecordIndex: Sendable {
    /// Record number plus one; 0 is empty. A power of two long.
    private var buckets: [UInt32]
    /// Entries held.
    private(set) var count = 0

    init() {
        buckets = [UInt32](repeating: 0, count: 16)
    }

    /// Buckets held (for tests and measurements).
    var capacity: Int { buckets.count }

    private var mask: Int { buckets.count - 1 }

    /// Calls `body` with every record whose key `matches` accepts, among those probed from
    /// `hash`'s bucket.
    func forEach(hash: UInt64, matching matches: (UInt32) -> Bool, _ body: (UInt32) -> Void) {
        var bucket = Int(truncatingIfNeeded: hash) & mask
        while buckets[bucket] != 0 {
            let record = buckets[bucket] - 1
            if matches(record) { body(record) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Adds `record`, whose key hashes to `hash`. `rehash` gives any held record's key hash, for
    /// growing.
    mutating func insert(_ record: UInt32, hash: UInt64, rehash: (UInt32) -> UInt64) {
        precondition(record < UInt32.max, "record numbers are below 2^32 - 1")
        if (count + 1) * 4 > buckets.count * 3 { grow(rehash: rehash) }
        place(record, hash: hash)
        count += 1
    }

    /// Removes `record`, whose key hashes to `hash`; false when it is not held.
    @discardableResult
    mutating func remove(_ record: UInt32, hash: UInt64, rehash: (UInt32) -> UInt64) -> Bool {
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
            let distanceFromHome = (next - home) & mask
            let distanceFromHole = (next - hole) & mask
            if distanceFromHome >= distanceFromHole {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
        count -= 1
        return true
    }

    private mutating func place(_ record: UInt32, hash: UInt64) {
        var bucket = Int(truncatingIfNeeded: hash) & mask
        while buckets[bucket] != 0 { bucket = (bucket + 1) & mask }
        buckets[bucket] = record + 1
    }

    private mutating func grow(rehash: (UInt32) -> UInt64) {
        let old = buckets
        buckets = [UInt32](repeating: 0, count: old.count * 2)
        for stored in old where stored != 0 { place(stored - 1, hash: rehash(stored - 1)) }
    }
}
