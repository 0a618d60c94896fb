/// A key the registry's in-memory index can hold: fixed-size, with a keyed hash.
protocol HashIndexKey: Equatable, Sendable {
    /// A key never looked up, to fill empty buckets.
    static var placeholder: Self { get }
    func hash(seed: UInt64) -> UInt64
}

/// The map behind the registry's two big indexes (device ID to slot, claim to slot): open
/// addressing with linear probing over one flat array of buckets, values `UInt32` slot numbers,
/// no deletion.
///
/// Why not `Dictionary`: growing a dictionary rehashes every entry at once, and at a million
/// devices that held the engine's lock for a tenth of a second, which was the whole latency
/// tail. This index grows incrementally: when full it allocates a table twice the size and
/// moves a few old buckets on every insert, so no single call does more than a small, bounded
/// amount of work. Its hash is a keyed multiply-mix (seeded randomly per index, so clients
/// cannot choose colliding identifiers without knowing the seed), several times cheaper than
/// SipHash on 20-byte keys.
struct HashIndex<Key: HashIndexKey>: Sendable {
    struct Bucket: Sendable {
        var key: Key
        /// ``HashIndex/empty`` when the bucket is free.
        var value: UInt32
    }

    static var empty: UInt32 { .max }
    /// Old buckets moved per insert while growing; more than the 4/3 needed to finish before
    /// the new table fills.
    static var migrationStep: Int { 8 }

    private var buckets: [Bucket]
    private var used = 0
    /// The table being emptied into `buckets` while growing, and how far the move has got.
    private var old: [Bucket]?
    private var moved = 0
    private let seed: UInt64
    /// Distinct keys.
    private(set) var count = 0

    init(capacity: Int = 1024, seed: UInt64 = .random(in: .min ... .max)) {
        var size = 16
        while size < capacity { size <<= 1 }
        buckets = Array(repeating: Bucket(key: .placeholder, value: Self.empty), count: size)
        self.seed = seed
    }

    func value(for key: Key) -> UInt32? {
        let hash = key.hash(seed: seed)
        if let index = Self.find(key, hash: hash, in: buckets) { return buckets[index].value }
        if let old, let index = Self.find(key, hash: hash, in: old) { return old[index].value }
        return nil
    }

    /// Sets `key` to `value` and returns the value it had, nil when it is new.
    @discardableResult
    mutating func set(_ key: Key, _ value: UInt32) -> UInt32? {
        precondition(value != Self.empty, "UInt32.max marks free buckets")
        let hash = key.hash(seed: seed)
        if let index = Self.find(key, hash: hash, in: buckets) {
            defer { buckets[index].value = value }
            return buckets[index].value
        }
        // A key still in the old table is shadowed by its copy here; the move skips it later.
        let previous = old.flatMap { old in Self.find(key, hash: hash, in: old).map { old[$0].value } }
        if previous == nil { count += 1 }
        insertNew(key, hash: hash, value: value)
        moveSomeOldBuckets()
        return previous
    }

    func forEach(_ body: (Key, UInt32) -> Void) {
        for bucket in buckets where bucket.value != Self.empty { body(bucket.key, bucket.value) }
        guard let old else { return }
        for bucket in old where bucket.value != Self.empty && Self.find(bucket.key, hash: bucket.key.hash(seed: seed), in: buckets) == nil {
            body(bucket.key, bucket.value)
        }
    }

    // MARK: - Internals

    private static func find(_ key: Key, hash: UInt64, in table: [Bucket]) -> Int? {
        let mask = table.count - 1
        var index = Int(truncatingIfNeeded: hash) & mask
        while true {
            let bucket = table[index]
            if bucket.value == empty { return nil }
            if bucket.key == key { return index }
            index = (index + 1) & mask
        }
    }

    /// Puts a key known to be absent from `buckets` into it, growing first when it is 3/4 full.
    private mutating func insertNew(_ key: Key, hash: UInt64, value: UInt32) {
        if (used + 1) * 4 > buckets.count * 3 { grow() }
        place(Bucket(key: key, value: value), hash: hash)
    }

    /// Stores `bucket` in the first free bucket of its probe sequence in `buckets`.
    private mutating func place(_ bucket: Bucket, hash: UInt64) {
        let mask = buckets.count - 1
        var index = Int(truncatingIfNeeded: hash) & mask
        while buckets[index].value != Self.empty { index = (index + 1) & mask }
        buckets[index] = bucket
        used += 1
    }

    private mutating func grow() {
        // A move still under way (which the step size makes rare) is finished first.
        while old != nil { moveSomeOldBuckets(all: true) }
        old = buckets
        moved = 0
        buckets = Array(repeating: Bucket(key: .placeholder, value: Self.empty), count: buckets.count * 2)
        used = 0
    }

    private mutating func moveSomeOldBuckets(all: Bool = false) {
        guard let table = old else { return }
        let end = all ? table.count : min(table.count, moved + Self.migrationStep)
        for index in moved..<end where table[index].value != Self.empty {
            let bucket = table[index]
            let hash = bucket.key.hash(seed: seed)
            if Self.find(bucket.key, hash: hash, in: buckets) == nil { place(bucket, hash: hash) }
        }
        moved = end
        if moved == table.count { old = nil }
    }
}

/// wyhash's folded 128-bit multiply: the high and low halves of `a × b`, xored.
@inline(__always)
func foldedMultiply(_ a: UInt64, _ b: UInt64) -> UInt64 {
    let product = a.multipliedFullWidth(by: b)
    return product.high ^ product.low
}

extension UUID128: HashIndexKey {
    static var placeholder: UUID128 { .zero }

    func hash(seed: UInt64) -> UInt64 {
        foldedMultiply(high ^ seed ^ 0xA076_1D64_78BD_642F, low ^ 0xE703_7ED1_A0B4_28DB)
    }
}
