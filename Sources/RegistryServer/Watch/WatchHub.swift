import NIOConcurrencyHelpers
import NIOCore
import RegistryCore
import RegistryWire

/// The node's change feed and the count of its watchers, under one lock of their own (not the
/// engine's): the commit pipeline publishes each commit's events once, and every watcher reads
/// what it wants from the one feed, so many watchers cost one copy of the events, and a
/// watcher that does not read costs nothing but its place (its backlog is the feed itself).
final class WatchHub: Sendable {
    private struct State {
        var feed: ChangeFeed
        /// The recent events in wire form, packed once for every watcher.
        var packed = PackedEvents()
        /// The last cursor packed, which every caught-up watcher sends after each publish.
        var lastCursor: (cursor: WatchCursor, field: ByteBuffer)?
        var watchers = 0
        /// Watchers that read everything, each with what wakes it at the next publish.
        var waiting: [ObjectIdentifier: @Sendable () -> Void] = [:]
        /// The reads since the last publish, newest last, at most ``readsKept``: the caught-up
        /// watchers of one filter all read a publish's events alike, and each after the first
        /// takes its answer from here rather than scanning and slicing the feed again.
        var recentReads: [SharedRead] = []
        /// Reads answered from ``recentReads``.
        var readsShared = 0
    }

    /// A read (``read(_:limit:id:wake:)``) and its answer, for readers that read alike.
    private struct SharedRead {
        let before: FeedReader
        let limit: Int
        let after: FeedReader
        let scan: FeedScan
        let runs: [ByteBuffer]
        let bytes: Int
    }

    /// Reads kept between publishes: a watcher reads a large commit's events in several frames
    /// (``WatchHandler``'s 256 events each), and the others follow it read by read.
    private static let readsKept = 64

    private let state: NIOLockedValueBox<State>
    /// Watchers served at once (`--max-watchers`).
    let maxWatchers: Int

    init(feed: ChangeFeed, maxWatchers: Int) {
        state = NIOLockedValueBox(State(feed: feed))
        self.maxWatchers = maxWatchers
    }

    /// Adds one commit's events, after which the node holds `vector` durably, and wakes the
    /// watchers that were waiting for them.
    func publish(_ entries: [FeedEntry], through vector: VersionVector) {
        let woken = state.withLockedValue { state -> [@Sendable () -> Void] in
            let erased = state.feed.publish(entries, through: vector)
            // Reads kept share the packed chunks: let go of them first, so that a forget's
            // erasure overwrites the packed copies of its events in place, not in a copy.
            state.recentReads = []
            if !erased.isEmpty { state.packed.erase(erased) }
            guard !state.waiting.isEmpty else { return [] }
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for wake in woken { wake() }
    }

    /// A peer's snapshot replaced the node's state, which holds `vector`: the feed starts again
    /// there, and every watcher is woken to find out whether its cursor still holds.
    func restart(holding vector: VersionVector) {
        let woken = state.withLockedValue { state -> [@Sendable () -> Void] in
            state.feed.restart(holding: vector)
            state.recentReads = []
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for wake in woken { wake() }
    }

    /// Takes a watcher's place; false when the node serves `maxWatchers` already.
    func admit() -> Bool {
        state.withLockedValue { state in
            guard state.watchers < maxWatchers else { return false }
            state.watchers += 1
            return true
        }
    }

    /// Gives a watcher's place back, `id` its identity in ``read(_:limit:id:wake:)``.
    func leave(_ id: ObjectIdentifier) {
        state.withLockedValue { state in
            state.watchers -= 1
            state.waiting[id] = nil
        }
    }

    /// A reader of the feed after `cursor` (``FeedReader/init(feed:after:filter:)``). When the
    /// node does not hold the cursor yet, `wake` is called at the next publish, to try again.
    func open(after cursor: VersionVector?, filter: FeedFilter, id: ObjectIdentifier, wake: @escaping @Sendable () -> Void) throws(FeedReadError) -> FeedReader {
        try state.withLockedValue { state in
            Result { () throws(FeedReadError) in
                do throws(FeedReadError) {
                    return try FeedReader(feed: state.feed, after: cursor, filter: filter)
                } catch {
                    if case .notCaughtUp = error { state.waiting[id] = wake }
                    throw error
                }
            }
        }.get()
    }

    /// Reads on (``FeedReader/scan(_:limit:scanLimit:)``), once for readers that read alike
    /// between two publishes: where the events are, their fields
    /// in wire form (runs of ``WatchFrames/appendEventField(_:to:)``'s, shared by every watcher
    /// that sends them) and the runs' size, and whether the reader has read everything
    /// (`caughtUp`; then `wake` is called at the next publish).
    func read(
        _ reader: inout FeedReader, limit: Int, id: ObjectIdentifier, wake: @escaping @Sendable () -> Void
    ) throws(FeedReadError) -> (scan: FeedScan, runs: [ByteBuffer], bytes: Int, caughtUp: Bool) {
        try state.withLockedValue { state in
            Result { () throws(FeedReadError) in
                let scan: FeedScan
                let runs: [ByteBuffer]
                let bytes: Int
                // The feed has not changed since a read that read alike: its answer is this one's.
                if let shared = state.recentReads.last(where: { $0.limit == limit && $0.before.readsAlike(reader) }) {
                    reader = shared.after
                    (scan, runs, bytes) = (shared.scan, shared.runs, shared.bytes)
                    state.readsShared += 1
                } else {
                    let before = reader
                    scan = try reader.scan(state.feed, limit: limit)
                    (runs, bytes) = state.packed.runs(at: scan.positions, of: state.feed)
                    if state.recentReads.count == Self.readsKept { state.recentReads.removeFirst() }
                    state.recentReads.append(SharedRead(before: before, limit: limit, after: reader, scan: scan, runs: runs, bytes: bytes))
                }
                let caughtUp = reader.isCaughtUp(in: state.feed)
                if caughtUp { state.waiting[id] = wake }
                return (scan, runs, bytes, caughtUp)
            }
        }.get()
    }

    /// The events at `positions`, which the feed holds (a reader just read them).
    func entries(at positions: [UInt64]) -> [FeedEntry] {
        state.withLockedValue { state in positions.map { state.feed[$0] } }
    }

    /// `cursor` as a `WatchEvents` field (``WatchFrames/cursorField(_:)``), packed once for
    /// every watcher that sends the same one, as caught-up watchers do after each publish.
    func cursorField(_ cursor: WatchCursor) throws(CodecError) -> ByteBuffer {
        if let last = state.withLockedValue({ $0.lastCursor }), last.cursor == cursor { return last.field }
        let field = try WatchFrames.cursorField(cursor)
        state.withLockedValue { $0.lastCursor = (cursor, field) }
        return field
    }

    /// Reads answered by an earlier read that read alike, since the node started.
    var readsShared: Int { state.withLockedValue { $0.readsShared } }

    /// Watchers served now.
    var watchers: Int { state.withLockedValue { $0.watchers } }

    /// Events held, and the positions they span.
    var held: (events: Int, first: UInt64, end: UInt64) {
        state.withLockedValue { ($0.feed.count, $0.feed.firstPosition, $0.feed.endPosition) }
    }
}
