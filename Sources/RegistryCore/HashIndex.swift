import Platform

/// A key the registry's in-memory index can hold: plain bytes (all-zero bytes are a valid key,
/// so a zero-filled table is empty), with a keyed hash.
protocol HashIndexKey: Equatable, Sendable, BitwiseCopyable {
    func hash(seed: UInt64) -> UInt64
    /// False for keys that are only part of what they stand for (``HashTag``): two entries may
    /// then have equal keys, lookups tell them apart by value (``HashIndex/value(for:where:)``),
    /// and entries are only ever inserted (``HashIndex/insertNew(_:_:)``), never set again.
    static var isWholeKey: Bool { get }
}

extension HashIndexKey {
    static var isWholeKey: Bool { true }
}

/// The map behind the registry's two big indexes (tags of device IDs to slot, in
/// ``DeviceIndex``; claim to slot): open addressing with linear probing over one flat table of
/// buckets, values `UInt32` slot numbers, no deletion but a bulk one that builds the table again
/// (``removeAll(where:)``, for the rare change that re-keys many entries at once).
///
/// Why not `Dictionary`: growing a dictionary rehashes every entry at once, and at a million
/// devices that held the engine's lock for a tenth of a second, which was the whole latency
/// tail. This index grows incrementally: when full it switches to a table twice the size (or,
/// once ready, to one its owner reserved for many entries to come, ``reserve(holding:)``) and
/// moves a few old buckets (and the rest of their cluster) on every insert, so no single call
/// does more than a small amount of work: clusters at 3/4 load are a few buckets long on
/// average and, by linear probing's known bounds, a few hundred at most in tables of millions.
/// Tables come zero-filled from a ``TableAllocator``, so allocating one does not touch its
/// memory. When the allocator makes big blocks ready in the background (a running node's does:
/// huge pages, populated on a thread of their own), a table's successor is allocated early, from
/// 70% load, and the switch waits until it is ready, going on in the current table past 75% load
/// if need be (and hurrying the allocator), up to 7/8: the owner never faults the new table's
/// pages in under its lock (docs/architecture.md, "Memory", has what that cost).
///
/// Its hash is a keyed multiply-mix (seeded randomly per index unless its owner gives a secret
/// seed, as a node does for its claim index, or for ``HashTag``s by their owner, so clients cannot choose colliding identifiers without knowing the seed), several times cheaper than SipHash on
/// 20-byte keys.
///
/// A value type: copies share tables until one of them writes (copy on write).
struct HashIndex<Key: HashIndexKey>: Sendable {
    /// Old buckets moved per insert at least while growing: more than the 4/3 needed to finish
    /// before the new table fills. Each move also finishes the cluster it ends in (see
    /// ``moveSomeOldBuckets(all:)``), so an insert moves about 5.6 buckets on average, and a
    /// move is over after about a sixth as many inserts as the old table has buckets.
    static var migrationStep: Int { 2 }

    /// Old buckets an insert moves on average, its step and the rest of the cluster that step
    /// ends in: about 5.6 at 3/4 load (measured). ``touch(_:)`` reads where that many land.
    static var bucketsMovedPerInsert: Int { 6 }

    private var table: BucketTable<Key>
    /// The table being emptied into `table` while growing, and how far the move has got: every
    /// old bucket below `moved` is in `table`, and the one just below `moved` is empty.
    private var old: BucketTable<Key>?
    private var moved = 0
    /// The next table, being made ready (see the type's notes); only for big tables.
    private var spare: BucketTable<Key>?
    /// A table for what ``reserve(holding:)`` asked for, being made ready in the background;
    /// the index grows as usual meanwhile.
    private var reserved: BucketTable<Key>?
    let seed: UInt64
    private let allocator: any TableAllocator
    /// Entries: distinct keys, or for ``HashTag``s the entries inserted.
    private(set) var count = 0

    /// Buckets of a new index's table unless it is sized for more.
    static var minimumCapacity: Int { 1024 }

    /// `capacity` is taken as it is (at least 16), not rounded up to a power of two: a node sized
    /// for N devices gets the buckets that hold N, not up to twice that.
    init(capacity: Int = minimumCapacity, seed: UInt64 = .random(in: .min ... .max), allocator: any TableAllocator = HeapTableAllocator()) {
        table = BucketTable(capacity: max(16, capacity), allocator: allocator)
        self.seed = seed
        self.allocator = allocator
    }

    /// The capacity that holds `entries` without growing, and without making the next table
    /// ready either (that starts past ``spareFromTenths`` of the buckets): a node sized for N
    /// devices allocates nothing more for its indexes below N.
    static func capacity(holding entries: Int) -> Int {
        max(minimumCapacity, entries * 10 / spareFromTenths + 1)
    }

    /// The bytes of a table of ``capacity(holding:)`` buckets.
    static func tableBytes(holding entries: Int) -> Int {
        capacity(holding: entries) * MemoryLayout<BucketTable<Key>.Bucket>.stride
    }

    /// In a forked child (`ForkedWriter`) that reads this index no more: gives up the child's copy
    /// of its tables, so that the parent's next write to each page takes it back instead of
    /// copying it under the engine's lock. The index must not be used again in the child.
    func dropPagesInForkedChild() {
        table.dropPagesInForkedChild()
        old?.dropPagesInForkedChild()
        spare?.dropPagesInForkedChild()
        reserved?.dropPagesInForkedChild()
    }

    /// ``forEach(_:)`` in a forked child that reads this index once, to write it out: each stretch
    /// of a table is let go of once read (``dropPagesInForkedChild()``), so the parent's writes
    /// copy fewer pages the further the walk has got. The index must not be used again.
    func drainInForkedChild(_ body: (Key, UInt32) -> Void) {
        if let old {
            // Before `table`, which this walk looks keys up in.
            old.forEachDroppingPagesInForkedChild(from: moved) { key, value in
                if !isShadowed(key, hash: key.hash(seed: seed)) { body(key, value) }
            }
        }
        table.forEachDroppingPagesInForkedChild(body)
        dropPagesInForkedChild()
    }

    func value(for key: Key) -> UInt32? {
        value(for: key, where: { _ in true })
    }

    /// Whether an old table's entry with `key`, at or above `moved` (every entry below is in the
    /// current table), was set again in the current table, which then holds its value. Partial
    /// keys are never set again.
    @inline(__always)
    private func isShadowed(_ key: Key, hash: UInt64) -> Bool {
        Key.isWholeKey && table.find(key, hash: hash) != nil
    }

    /// The value of the entry whose key is `key` and whose value `accepts` takes: for an index
    /// of ``HashTag``s, where entries with equal tags are told apart by what their values name.
    @inline(__always)
    func value(for key: Key, where accepts: (UInt32) -> Bool) -> UInt32? {
        let hash = key.hash(seed: seed)
        if let index = table.find(key, hash: hash, where: accepts) { return table.value(at: index) }
        return unmovedValue(for: key, hash: hash, where: accepts)
    }

    /// `key`'s value in the old table, when it has not been moved yet. Moves stop only past an
    /// empty bucket (see ``moveSomeOldBuckets(all:)``), so a key whose probe starts below the
    /// move's cursor either was moved (it is in `table`) or is absent: linear probing never
    /// skips an empty bucket. Those keys, half of all lookups on average while the index grows,
    /// are not looked for in the old table at all.
    @inline(__always)
    private func unmovedValue(for key: Key, hash: UInt64, where accepts: (UInt32) -> Bool = { _ in true }) -> UInt32? {
        guard let old, old.startIndex(hash: hash) >= moved, let index = old.find(key, hash: hash, where: accepts) else { return nil }
        return old.value(at: index)
    }

    /// True while the entries of an old table are being moved into the current one.
    var isMovingEntries: Bool { old != nil }

    /// Asks for the cache lines that looking up and then inserting `keys` will touch, and returns
    /// a word made of what it read in the old table while the index grows, 0 otherwise
    /// (meaningless: callers only need the reads to happen). The loops do nothing else, no
    /// reference counting in particular, whose atomic instructions would wait for each read in
    /// turn: so the cache misses overlap. See ``RegistryState/warm(for:newDevices:)``.
    ///
    /// In the current table the first ``BucketTable/probeBuckets`` buckets of each key's probe are
    /// prefetched (``BucketTable/prefetch(hash:)``): a new key's lookup reads on past its first
    /// bucket, and with only that bucket read here, the others were most of the wait in the
    /// lookups that follow (docs/performance.md, "The whole probe warmed"). The first bucket is
    /// not read as well: that load waited for the line the prefetch had just asked for, and the
    /// batch's CPU was lower without it ("Warming without waiting").
    ///
    /// While the index grows, the old table is read: where the keys' lookups start in it, and
    /// the new buckets that the old entries moved by as many inserts land in. Without these, a
    /// registration cost twice as much CPU during a move as after it.
    func touch(_ keys: [Key]) -> UInt32 {
        let hashes = keys.map { $0.hash(seed: seed) }
        for hash in hashes { table.prefetch(hash: hash) }
        guard let old else { return 0 }
        let toMove = moved..<min(old.capacity, moved + keys.count * Self.bucketsMovedPerInsert)
        return old.sumOfStoredWords(at: hashes, notBelow: moved)
            &+ old.sumOfStoredWords(whereEntriesOf: toMove, land: table, seed: seed)
    }

    /// Asks the CPU for the cache lines of `key`'s probe (``BucketTable/prefetch(hash:)``), in the
    /// old table too while it holds keys not yet moved.
    func prefetch(_ key: Key) {
        let hash = key.hash(seed: seed)
        table.prefetch(hash: hash)
        if let old, old.startIndex(hash: hash) >= moved { old.prefetch(hash: hash) }
    }

    /// Sets `key` to `value` and returns the value it had, nil when it is new.
    @discardableResult
    mutating func set(_ key: Key, _ value: UInt32) -> UInt32? {
        precondition(Key.isWholeKey, "an index of partial keys only inserts (insertNew)")
        if !isKnownUniquelyReferenced(&table) { table = table.copy() }
        let hash = key.hash(seed: seed)
        // One probe: it ends at the key's bucket, or at the free bucket a new key goes into.
        let (index, found) = table.bucket(of: key, hash: hash)
        if found {
            let previous = table.value(at: index)
            // Not written when unchanged: a page a forked snapshot's child shares is copied when
            // written (``HoldableIndex``), and a returning device sets its claims again.
            if previous != value { table.setValue(value, at: index) }
            return previous
        }
        // A key still in the old table is shadowed by its copy here; the move skips it later.
        let previous = unmovedValue(for: key, hash: hash)
        if previous == nil { count += 1 }
        place(key, value, hash: hash, freeBucket: index)
        return previous
    }

    /// Adds an entry without looking for `key` first: for an index of ``HashTag``s, whose
    /// caller knows that what `value` names is not in the index yet.
    mutating func insertNew(_ key: Key, _ value: UInt32) {
        if !isKnownUniquelyReferenced(&table) { table = table.copy() }
        count += 1
        place(key, value, hash: key.hash(seed: seed))
    }

    /// `freeBucket`: the free bucket that ends `key`'s probe in the current table, when the
    /// caller has just probed for it (the table has not changed since).
    private mutating func place(_ key: Key, _ value: UInt32, hash: UInt64, freeBucket: Int? = nil) {
        if reserved != nil, switchToReservedTable() {
            table.place(key, value, hash: hash)
        } else if Self.mustGrow(used: table.used + 1, capacity: table.capacity, nextTableReady: nextTableReady()) {
            grow()
            table.place(key, value, hash: hash)
        } else if let freeBucket {
            table.store(key, value, inFreeBucket: freeBucket)
        } else {
            table.place(key, value, hash: hash)
        }
        moveSomeOldBuckets()
        prepareSpare()
    }

    /// In the order of ``drainInForkedChild(_:)``: the old table's unmoved entries, then the
    /// current table's, each in its buckets' order.
    func forEach(_ body: (Key, UInt32) -> Void) {
        if let old {
            old.forEach(from: moved) { key, value in
                if !isShadowed(key, hash: key.hash(seed: seed)) { body(key, value) }
            }
        }
        table.forEach(body)
    }

    /// Removes every entry `shouldRemove` picks and returns them: one pass over the table, and,
    /// when any goes, a new table of the same size built from the others (linear probing cannot
    /// empty a bucket in place). Costs time in proportion to the table, so it is only for rare
    /// bulk changes.
    mutating func removeAll(where shouldRemove: (Key, UInt32) -> Bool) -> [(Key, UInt32)] {
        var removed = [(Key, UInt32)]()
        forEach { key, value in if shouldRemove(key, value) { removed.append((key, value)) } }
        guard !removed.isEmpty else { return [] }
        // Built aside: the old tables may be shared with copies of this index.
        let kept = BucketTable<Key>(capacity: table.capacity, allocator: allocator)
        forEach { key, value in
            if !shouldRemove(key, value) { kept.place(key, value, hash: key.hash(seed: seed)) }
        }
        table = kept
        old = nil
        moved = 0
        count -= removed.count
        return removed
    }

    private mutating func grow() {
        if spare != nil, isKnownUniquelyReferenced(&spare), spare!.capacity == table.capacity * 2 {
            switchTable(to: spare!)
        } else {
            switchTable(to: BucketTable(capacity: table.capacity * 2, allocator: allocator))
        }
        spare = nil
        // Grown as far by itself: the reservation has nothing left to buy.
        if let reserved, reserved.capacity <= table.capacity * 2 { self.reserved = nil }
    }

    /// Makes `next` the current table and the current one the old table, whose entries then
    /// move a few at each insert. A move still under way (which the step size makes rare) is
    /// finished first.
    private mutating func switchTable(to next: BucketTable<Key>) {
        while old != nil { moveSomeOldBuckets(all: true) }
        old = table
        moved = 0
        table = next
    }

    /// Sizes the index for `entries` at once, when that is more than its next table would hold:
    /// for an owner about to take many entries it knows of (a node catching up from a peer),
    /// which would otherwise grow through every size on the way, moving every entry and making
    /// every table ready again each time. When the allocator prepares a table of that size in
    /// the background, the index goes on as before (growing as usual) until it is ready, then
    /// switches to it at its first insert after that with no move under way, at any load;
    /// otherwise it switches at once. Either way its entries then move over a few at each
    /// insert, as in any growth. Fewer entries than the next doubling of the table, or of the
    /// one already reserved, holds change nothing: growth gets there by itself, and a table
    /// being made ready is not thrown away for one a little bigger. Returns whether the index
    /// acted.
    @discardableResult
    mutating func reserve(holding entries: Int) -> Bool {
        let wanted = Self.capacity(holding: entries)
        guard wanted > max(table.capacity, reserved?.capacity ?? 0) * 2 else { return false }
        if allocator.preparesInBackground(bytes: wanted * MemoryLayout<BucketTable<Key>.Bucket>.stride) {
            reserved = BucketTable(capacity: wanted, allocator: allocator)
        } else {
            if !isKnownUniquelyReferenced(&table) { table = table.copy() }
            switchTable(to: BucketTable(capacity: wanted, allocator: allocator))
            (spare, reserved) = (nil, nil)
        }
        return true
    }

    /// Switches to the reserved table when it is ready and no move is under way (a switch
    /// would finish that move at once); returns whether it did. A copy of this index that shares
    /// the reserved table gives it up instead: only one of them may write into it.
    private mutating func switchToReservedTable() -> Bool {
        guard old == nil, reserved!.isReady else { return false }
        guard isKnownUniquelyReferenced(&reserved) else {
            reserved = nil
            return false
        }
        switchTable(to: reserved!)
        (spare, reserved) = (nil, nil)
        return true
    }

    /// Load at which the next table starts being made ready, as a fraction over 10.
    static var spareFromTenths: Int { 7 }

    /// Whether a table of `capacity` buckets must switch to the next one before holding `used`:
    /// past 3/4 load once the next table is ready, and past 7/8 in any case. Linear probing at
    /// 7/8 load costs about 30 probes per miss instead of 8, within a few cache lines; that is
    /// cheaper than faulting pages in under the lock, and it lasts only until the next table's
    /// pages are there.
    static func mustGrow(used: Int, capacity: Int, nextTableReady: @autoclosure () -> Bool) -> Bool {
        used * 8 > capacity * 7 || (used * 4 > capacity * 3 && nextTableReady())
    }

    /// True when switching to a bigger table now costs no page faults: the spare is ready, or the
    /// allocator does not prepare tables of the next size in the background. Asked only past 3/4
    /// load, where the index waits for the spare: when it is not ready yet, it is hurried.
    private func nextTableReady() -> Bool {
        guard let spare else { return !hasSpare(capacity: table.capacity) }
        if spare.isReady { return true }
        spare.hurry()
        return false
    }

    private func hasSpare(capacity: Int) -> Bool {
        allocator.preparesInBackground(bytes: capacity * 2 * MemoryLayout<BucketTable<Key>.Bucket>.stride)
    }

    /// From 70% load, allocates the next table, when the allocator makes it ready in the
    /// background (see the type's notes).
    private mutating func prepareSpare() {
        guard old == nil, table.used * 10 >= table.capacity * Self.spareFromTenths, hasSpare(capacity: table.capacity)
        else { return }
        // A copy of this index may share the spare: then this one makes its own.
        if spare == nil || !isKnownUniquelyReferenced(&spare) { spare = BucketTable(capacity: table.capacity * 2, allocator: allocator) }
    }

    /// An empty index that takes its tables from the same allocator, with a seed of its own.
    func emptyIndex() -> HashIndex {
        HashIndex(allocator: allocator)
    }

    /// Moves some of an old table's buckets into the current one, as an insert does; for a caller
    /// that must see the move finished before it reads ``entry(atBucket:)``, with no insert to come.
    mutating func continueMoving() {
        if !isKnownUniquelyReferenced(&table) { table = table.copy() }
        moveSomeOldBuckets()
    }

    /// The entry in bucket `index` of the current table (below ``capacity``), nil when it is
    /// empty: a walk over every entry in steps, while no entries are moving.
    func entry(atBucket index: Int) -> (Key, UInt32)? {
        precondition(old == nil, "the buckets of an index that is moving entries are not all its entries")
        return table.entry(at: index)
    }

    /// True while a next table is being made ready (for tests).
    var isPreparingNextTable: Bool { spare != nil }

    /// True while a table for ``reserve(holding:)`` is being made ready (for tests).
    var isPreparingReservedTable: Bool { reserved != nil }

    /// True once the next table is ready (for tests).
    var isNextTableReady: Bool { spare?.isReady ?? false }

    /// True while entries move from an old table (for tests).
    var isMoving: Bool { old != nil }

    /// Buckets in the current table (for tests).
    var capacity: Int { table.capacity }

    /// Moves the next ``migrationStep`` old buckets (or all of them) into the current table, and
    /// then the rest of their cluster: a move stops only after an empty bucket, which is what
    /// lets lookups skip the old table for keys whose probes start below it (see
    /// ``unmovedValue(for:hash:)``). Clusters at 3/4 load are a few buckets long on average.
    private mutating func moveSomeOldBuckets(all: Bool = false) {
        guard let source = old else { return }
        let least = all ? source.capacity : min(source.capacity, moved + Self.migrationStep)
        var index = moved
        while index < source.capacity, index < least || source.isOccupied(index - 1) {
            if let (key, value) = source.entry(at: index) {
                let hash = key.hash(seed: seed)
                if !isShadowed(key, hash: hash) { table.place(key, value, hash: hash) }
            }
            index += 1
        }
        moved = index
        if moved == source.capacity { old = nil }
    }
}

/// One open-addressing table: `capacity` buckets (any number) in a ``TableBlock``.
/// A bucket's stored word is its value plus one, so zero means free.
///
/// A hash's probe starts at `hash × capacity / 2^64` (the high word of the product): any
/// capacity, where a mask wanted a power of two, and a home that keeps the hashes' order in
/// tables of every size, so entries listed in one table's order fill another front to back.
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
    private let allocator: any TableAllocator
    private let memory: any TableBlock
    private let buckets: UnsafeMutablePointer<Bucket>

    init(capacity: Int, allocator: any TableAllocator) {
        precondition(capacity > 0, "a table needs buckets")
        self.capacity = capacity
        self.allocator = allocator
        memory = allocator.zeroedBlock(bytes: capacity * MemoryLayout<Bucket>.stride)
        buckets = memory.base.bindMemory(to: Bucket.self, capacity: capacity)
    }

    /// See ``HashIndex/dropPagesInForkedChild()``.
    func dropPagesInForkedChild() {
        ForkedWriter.dropPagesInChild(memory.base, bytes: capacity * MemoryLayout<Bucket>.stride)
    }

    /// ``forEach(_:)`` in a forked child, letting go of each 2 MiB of buckets once read (see
    /// ``HashIndex/drainInForkedChild(_:)``). Buckets below `first` are let go of unread.
    func forEachDroppingPagesInForkedChild(from first: Int = 0, _ body: (Key, UInt32) -> Void) {
        let stretch = max(1, (2 << 20) / MemoryLayout<Bucket>.stride)
        var start = 0
        while start < capacity {
            let end = min(capacity, start + stretch)
            for index in max(start, first)..<max(end, first) {
                if let (key, value) = entry(at: index) { body(key, value) }
            }
            ForkedWriter.dropPagesInChild(UnsafeMutableRawPointer(buckets + start), bytes: (end - start) * MemoryLayout<Bucket>.stride)
            start = end
        }
    }

    func copy() -> BucketTable {
        let copy = BucketTable(capacity: capacity, allocator: allocator)
        copy.buckets.update(from: buckets, count: capacity)
        copy.used = used
        return copy
    }

    /// The first bucket of `hash`'s probe sequence.
    @inline(__always)
    func startIndex(hash: UInt64) -> Int { Self.home(of: hash, capacity: capacity) }

    /// See the type's notes: the high bits of the hash place it.
    @inline(__always)
    static func home(of hash: UInt64, capacity: Int) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: capacity)).high)
    }

    /// The bucket after `index`, past the last one the first.
    @inline(__always)
    func next(_ index: Int) -> Int { index + 1 == capacity ? 0 : index + 1 }

    /// Asks the CPU for the buckets `hash`'s probe will look at, to be written: the cache lines of
    /// the ``probeBuckets`` from where it starts.
    @inline(__always)
    func prefetch(hash: UInt64) {
        let start = UInt(bitPattern: buckets + startIndex(hash: hash))
        var line = start & ~UInt(Self.cacheLineBytes - 1)
        while line < start + UInt(Self.probeBytes) {
            Prefetch.forWriting(UnsafeRawPointer(bitPattern: line)!)
            line += UInt(Self.cacheLineBytes)
        }
    }

    /// Buckets whose cache lines ``prefetch(hash:)`` asks for. A probe for a key the table does not
    /// hold, as every insert of a new key is, looks at (1 + 1/(1 − α)²)/2 buckets on average with
    /// linear probing: 3.1 at α = 0.56, 8.5 at 3/4. Asking for only the line where a probe starts
    /// left the rest of a claim's 24-byte buckets to miss in turn. Eight was the fastest of 1, 4, 8
    /// and 12 in `swift package benchmark --target BatchApplying` (docs/performance.md,
    /// "Prefetching a whole probe").
    static var probeBuckets: Int { 8 }

    private static var probeBytes: Int { probeBuckets * MemoryLayout<Bucket>.stride }

    private static var cacheLineBytes: Int { 64 }

    /// The stored words of the buckets `hashes` start at, added up (see ``HashIndex/touch(_:)``).
    /// Only buckets from `lowest` on are read.
    func sumOfStoredWords(at hashes: [UInt64], notBelow lowest: Int) -> UInt32 {
        let (buckets, capacity) = (self.buckets, capacity)
        var sum: UInt32 = 0
        hashes.withUnsafeBufferPointer { hashes in
            for hash in hashes {
                let index = Self.home(of: hash, capacity: capacity)
                if index >= lowest { sum &+= buckets[index].stored }
            }
        }
        return sum
    }

    /// The stored words of the buckets of `target` at which the entries in `range` of this table
    /// start their probes, added up (see ``HashIndex/touch(_:)``).
    func sumOfStoredWords(whereEntriesOf range: Range<Int>, land target: BucketTable, seed: UInt64) -> UInt32 {
        precondition(range.lowerBound >= 0 && range.upperBound <= capacity, "buckets \(range) are not all in the table")
        let (buckets, targetBuckets, targetCapacity) = (self.buckets, target.buckets, target.capacity)
        var sum: UInt32 = 0
        for index in range where buckets[index].stored != 0 {
            sum &+= targetBuckets[Self.home(of: buckets[index].key.hash(seed: seed), capacity: targetCapacity)].stored
        }
        return sum
    }

    func find(_ key: Key, hash: UInt64) -> Int? {
        find(key, hash: hash, where: { _ in true })
    }

    /// The bucket of the entry with `key` whose value `accepts` takes.
    @inline(__always)
    func find(_ key: Key, hash: UInt64, where accepts: (UInt32) -> Bool) -> Int? {
        var index = startIndex(hash: hash)
        while true {
            let bucket = buckets[index]
            if bucket.stored == 0 { return nil }
            if bucket.key == key && accepts(bucket.stored - 1) { return index }
            index = next(index)
        }
    }

    /// The bucket of the entry with `key` (`found`), or else the free bucket that ends its probe,
    /// where ``place(_:_:hash:)`` would put it.
    @inline(__always)
    func bucket(of key: Key, hash: UInt64) -> (index: Int, found: Bool) {
        var index = startIndex(hash: hash)
        while true {
            let bucket = buckets[index]
            if bucket.stored == 0 { return (index, false) }
            if bucket.key == key { return (index, true) }
            index = next(index)
        }
    }

    func value(at index: Int) -> UInt32 { buckets[index].stored - 1 }

    func isOccupied(_ index: Int) -> Bool { buckets[index].stored != 0 }

    /// See ``TableBlock/isReady``.
    var isReady: Bool { memory.isReady }

    /// See ``TableBlock/hurry()``.
    func hurry() { memory.hurry() }

    func setValue(_ value: UInt32, at index: Int) {
        precondition(value < .max, "UInt32.max cannot be stored")
        buckets[index].stored = value + 1
    }

    /// Stores a key known to be absent (for a ``HashTag``, an entry known to be new) in the first
    /// free bucket of its probe sequence.
    func place(_ key: Key, _ value: UInt32, hash: UInt64) {
        precondition(value < .max, "UInt32.max cannot be stored")
        var index = startIndex(hash: hash)
        while buckets[index].stored != 0 { index = next(index) }
        buckets[index] = Bucket(key: key, stored: value + 1)
        used += 1
    }

    /// Stores a key known to be absent in `index`, the free bucket that ends its probe
    /// (``bucket(of:hash:)``).
    func store(_ key: Key, _ value: UInt32, inFreeBucket index: Int) {
        precondition(value < .max, "UInt32.max cannot be stored")
        precondition(buckets[index].stored == 0, "bucket \(index) is not free")
        buckets[index] = Bucket(key: key, stored: value + 1)
        used += 1
    }

    func entry(at index: Int) -> (Key, UInt32)? {
        let bucket = buckets[index]
        return bucket.stored == 0 ? nil : (bucket.key, bucket.stored - 1)
    }

    /// Every entry from bucket `first` on.
    func forEach(from first: Int = 0, _ body: (Key, UInt32) -> Void) {
        for index in first..<capacity {
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
