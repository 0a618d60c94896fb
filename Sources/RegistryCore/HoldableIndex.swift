/// A ``HashIndex`` that can put its new keys into a table of their own for a while, so that the
/// main table is only read meanwhile: the claim index's, while a forked snapshot child
/// (RegistryServer's `ForkedSnapshot`) still shares the main table's pages with the node.
///
/// Why: every page the node writes while the child shares it is copied, under the engine's lock,
/// and first installs insert at random. Without holding, every huge page of a claim table of
/// gigabytes was written, copied and split into small pages within milliseconds of a fork, and
/// each small page then cost a fault of its own (docs/performance.md, "Snapshots from a fork").
/// The child lets go of the main table's pages once it has read them; a write after that takes
/// the page back whole.
///
/// Three phases:
/// - **Plain**: the main index alone.
/// - **Holding** (``hold(until:)``): a key the main index lacks goes into the held index; a key it
///   has is set there (that writes a shared page, but claims already held rarely change). A key is
///   in one of the two, never both.
/// - **Releasing** (once the hold's condition says so, or after ``release()``): new keys go into the
///   main index, and every insert there first moves one held entry over (once the held index has
///   finished growing), as a growing ``HashIndex`` moves its old buckets. Setting a held key sets
///   it in both. A held key already moved is in both, with the same value.
///
/// When the last held entry has moved, the held index goes and the index is plain again; entries
/// still held when the next hold starts are moved back at once. Lookups ask the main index
/// first: a key in both has the same value in both.
struct HoldableIndex<Key: HashIndexKey>: Sendable {
    private(set) var main: HashIndex<Key>
    /// The held index: empty, and unused, unless ``holdsEntries``. Not an optional: reaching into
    /// an optional index copied it (retaining its tables) on every lookup and insert.
    private var held: HashIndex<Key>
    /// True while entries are held aside, or moving back into the main index.
    private(set) var holdsEntries = false
    /// Set while holding: true once the hold may end (checked at each ``set(_:_:)``).
    private var mayRelease: (@Sendable () -> Bool)?
    /// Releasing: the held index's buckets below this one have been moved into `main`.
    private var nextHeldBucket = 0
    /// Held keys that are in `main` too.
    private var heldInMain = 0

    init(_ main: HashIndex<Key>) {
        precondition(Key.isWholeKey, "held entries are found by their keys")
        self.main = main
        held = main.emptyIndex()
    }

    /// Distinct keys.
    var count: Int { main.count + (holdsEntries ? held.count - heldInMain : 0) }

    /// Buckets in the main index's table.
    var capacity: Int { main.capacity }

    /// ``HashIndex/reserve(holding:)`` of the main index, which every entry ends in.
    @discardableResult
    mutating func reserve(holding entries: Int) -> Bool { main.reserve(holding: entries) }

    /// True while new keys go into the held index.
    var isHolding: Bool { mayRelease != nil }

    /// True while any entries are on their way to another table: the main index's growth, or
    /// held entries.
    var isMovingEntries: Bool { main.isMovingEntries || holdsEntries }

    /// The main index first: a key in both has the same value in both, and most lookups are of
    /// keys the main index has.
    func value(for key: Key) -> UInt32? {
        if let value = main.value(for: key) { return value }
        return holdsEntries ? held.value(for: key) : nil
    }

    /// Sets `key` to `value` and returns the value it had, nil when it is new.
    @discardableResult
    mutating func set(_ key: Key, _ value: UInt32) -> UInt32? {
        guard holdsEntries else { return main.set(key, value) }
        if let mayRelease, mayRelease() {
            release()
            if !holdsEntries { return main.set(key, value) }
        }
        if let previous = held.value(for: key) {
            held.set(key, value)
            if !isHolding, main.set(key, value) == nil { heldInMain += 1 }
            return previous
        }
        if isHolding {
            if main.value(for: key) != nil { return main.set(key, value) }
            return held.set(key, value)
        }
        let previous = main.set(key, value)
        moveOneHeldEntry()
        return previous
    }

    /// From now on, keys the main index lacks go into a held index, until `mayRelease` returns
    /// true (it is asked at each ``set(_:_:)``, so it must be cheap) or ``release()`` is called.
    /// Entries still held from an earlier hold are moved into the main index first, at once.
    mutating func hold(until mayRelease: @escaping @Sendable () -> Bool) {
        // Which leaves a held index that is new and empty (``dropHeldIndex()``).
        moveHeldEntries()
        holdsEntries = true
        self.mayRelease = mayRelease
    }

    /// Ends holding: the held entries move into the main index a few at a time from now on.
    mutating func release() {
        mayRelease = nil
        if holdsEntries, held.count == 0 { dropHeldIndex() }
    }

    /// Moves every held entry into the main index now, ending a hold.
    mutating func moveHeldEntries() {
        mayRelease = nil
        while holdsEntries { moveOneHeldEntry() }
    }

    /// One step of the move back: a step of the held index's own growth while it has one,
    /// otherwise the next held entry. Drops the held index after its last bucket.
    private mutating func moveOneHeldEntry() {
        guard holdsEntries else { return }
        if held.isMovingEntries { return held.continueMoving() }
        if let (key, value) = nextHeldEntry() {
            if main.set(key, value) == nil { heldInMain += 1 }
            // Where the entry after it goes: cached by the time the next step moves it.
            if let (next, _) = nextHeldEntry(advancing: false) { main.prefetch(next) }
            return
        }
        dropHeldIndex()
    }

    /// Lets the held index go (its tables with it), once it holds nothing `main` lacks.
    private mutating func dropHeldIndex() {
        held = main.emptyIndex()
        holdsEntries = false
        nextHeldBucket = 0
        heldInMain = 0
    }

    /// The held entry at or after `nextHeldBucket`, which moves past it when `advancing`; nil
    /// after the last.
    private mutating func nextHeldEntry(advancing: Bool = true) -> (Key, UInt32)? {
        while nextHeldBucket < held.capacity {
            if let entry = held.entry(atBucket: nextHeldBucket) {
                if advancing { nextHeldBucket += 1 }
                return entry
            }
            nextHeldBucket += 1
        }
        return nil
    }

    /// Calls `body` once with each key and its value, in the order of ``drainInForkedChild(_:)``.
    func forEach(_ body: (Key, UInt32) -> Void) {
        forEachHeldOnly(body)
        main.forEach(body)
    }

    /// The held entries that are not in `main`.
    private func forEachHeldOnly(_ body: (Key, UInt32) -> Void) {
        guard holdsEntries else { return }
        held.forEach { key, value in
            if heldInMain == 0 || main.value(for: key) == nil { body(key, value) }
        }
    }

    /// ``HashIndex/drainInForkedChild(_:)``: every entry once, each stretch of the main table let
    /// go of as it is read. The index must not be used again.
    func drainInForkedChild(_ body: (Key, UInt32) -> Void) {
        // Before the main table, which this walk looks keys up in.
        forEachHeldOnly(body)
        if holdsEntries { held.dropPagesInForkedChild() }
        main.drainInForkedChild(body)
    }

    /// ``HashIndex/removeAll(where:)``. While holding, from each index apart (the keys are in one
    /// or the other, and a removal builds a new table, writing no page of the old), and the hold
    /// goes on; otherwise after moving every held entry back.
    mutating func removeAll(where shouldRemove: (Key, UInt32) -> Bool) -> [(Key, UInt32)] {
        guard isHolding else {
            moveHeldEntries()
            return main.removeAll(where: shouldRemove)
        }
        return main.removeAll(where: shouldRemove) + held.removeAll(where: shouldRemove)
    }

    /// True while the held index is moving its own entries into a bigger table (for tests).
    var heldIndexIsGrowing: Bool { holdsEntries && held.isMovingEntries }

    /// ``HashIndex/touch(_:)`` in both indexes.
    func touch(_ keys: [Key]) -> UInt32 {
        main.touch(keys) &+ (holdsEntries ? held.touch(keys) : 0)
    }

    /// ``HashIndex/prefetch(_:)`` in both indexes.
    func prefetch(_ key: Key) {
        if holdsEntries { held.prefetch(key) }
        main.prefetch(key)
    }
}
