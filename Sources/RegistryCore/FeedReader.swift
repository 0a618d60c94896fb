/// Which events a watcher wants: some vendors or all, some kinds or all.
public struct FeedFilter: Hashable, Sendable {
    /// The vendors, by name; nil: every vendor.
    public let vendors: Set<String>?
    /// The kinds; nil: every kind.
    public let kinds: Set<FeedEventKind>?

    public init(vendors: Set<String>? = nil, kinds: Set<FeedEventKind>? = nil) {
        self.vendors = vendors
        self.kinds = kinds
    }

    /// Every event.
    public static let everything = FeedFilter()

    /// Whether the watcher wants `event`. An event with no vendor (a forget of a device the node
    /// never held) goes only to a watcher of every vendor; an erased one to nobody.
    public func matches(_ event: FeedEvent) -> Bool {
        guard let kind = event.kind else { return false }
        if let kinds, !kinds.contains(kind) { return false }
        guard let vendors else { return true }
        guard let vendor = event.vendor else { return false }
        return vendors.contains(vendor.name)
    }
}

/// Why a watcher cannot read on.
public enum FeedReadError: Error, Equatable, Sendable {
    /// The feed dropped events the watcher has not read; a cursor must cover `floor` to resume.
    case expired(floor: VersionVector)
    /// The node does not hold every operation the cursor names yet (it came from a node that is
    /// ahead): it can resume there once it does.
    case notCaughtUp(held: VersionVector)
}

/// What one read gives: the events, in the node's apply order, and the cursor after them, nil
/// while the reader is still inside the batch it resumed with (``FeedReader``).
public struct FeedBatch: Equatable, Sendable {
    public let entries: [FeedEntry]
    /// Each entry's position in the feed.
    public let positions: [UInt64]
    public let cursor: VersionVector?
}

/// What one scan gives (``FeedReader/scan(_:limit:scanLimit:)``): the positions of the events the
/// filter matched, in the node's apply order, and the cursor after them, as ``FeedBatch`` without
/// the events themselves (a node that sends packed events needs only where they are).
public struct FeedScan: Equatable, Sendable {
    public let positions: [UInt64]
    public let cursor: VersionVector?
}

/// One watcher's place in a ``ChangeFeed``: the next position to read, and its cursor, the
/// operations whose events it has been given (a version vector, which resumes on any node). A
/// plain value; the node's watch handler carries out what it reads.
///
/// A watcher that resumes from a cursor made elsewhere holds that node's view of the state. The
/// events from where it resumes (``ChangeFeed/start(after:)``) to where this node held everything
/// the cursor names (``ChangeFeed/heldPosition(of:)``: the first batch after which it did, and the
/// node must hold the cursor when the reader is made) take it to this node's view, but only all
/// together: in between, its view mixes the two nodes' and matches no cursor. So no cursor is
/// given until the reader is past that point, and a client applies the events it receives only
/// once a cursor follows them (the client library does). From there on the reader's cursor is
/// the node's, as a watcher's that never moved: what the node held before that batch is
/// everything the cursor names and everything read since.
public struct FeedReader: Sendable {
    public let filter: FeedFilter
    /// The position of the next event to look at.
    public private(set) var position: UInt64
    /// Every operation whose events the watcher has been given, or that had none it wants.
    private var seen: VersionVector
    /// Where the events that take a resumed watcher to this node's view end (``ChangeFeed/heldPosition(of:)``).
    public let resumedThrough: UInt64
    /// The feed's generation it reads (``ChangeFeed/generation``).
    private let generation: Int

    /// A reader that starts after `cursor` (``ChangeFeed/start(after:)``), or at the end of the
    /// feed, its cursor the feed's, when there is none.
    public init(feed: ChangeFeed, after cursor: VersionVector?, filter: FeedFilter) throws(FeedReadError) {
        self.filter = filter
        generation = feed.generation
        guard let cursor else {
            position = feed.endPosition
            resumedThrough = position
            seen = feed.published
            return
        }
        guard feed.published.covers(cursor) else { throw .notCaughtUp(held: feed.published) }
        guard let start = feed.start(after: cursor) else { throw .expired(floor: feed.floor) }
        position = start
        resumedThrough = feed.heldPosition(of: cursor)
        seen = cursor
    }

    /// The cursor, nil while inside the batch the reader resumed with.
    public var cursor: VersionVector? { position >= resumedThrough ? seen : nil }

    /// Whether `other` reads alike: from the same position of the same generation, with the same
    /// filter and cursor, and both inside the same resumed batch or both past theirs (after which
    /// ``resumedThrough`` no longer matters). Two such readers read the same events from one feed
    /// and end alike, so a node may read once for both (`WatchHub`).
    public func readsAlike(_ other: FeedReader) -> Bool {
        position == other.position && generation == other.generation && filter == other.filter && seen == other.seen
            && (resumedThrough == other.resumedThrough || (position >= resumedThrough && other.position >= other.resumedThrough))
    }

    /// Whether the reader has looked at every event the feed holds.
    public func isCaughtUp(in feed: ChangeFeed) -> Bool { position >= feed.endPosition }

    /// Reads on from ``position``: the next events the filter matches, at most `limit`, looking
    /// at no more than `scanLimit` events in all. The cursor rises past every operation whose
    /// events were all looked at, and to the feed's ``ChangeFeed/published`` once the reader is
    /// caught up.
    public mutating func read(_ feed: ChangeFeed, limit: Int, scanLimit: Int = 65_536) throws(FeedReadError) -> FeedBatch {
        let scanned = try scan(feed, limit: limit, scanLimit: scanLimit)
        return FeedBatch(entries: scanned.positions.map { feed[$0] }, positions: scanned.positions, cursor: scanned.cursor)
    }

    /// As ``read(_:limit:scanLimit:)``, giving where the events are rather than the events.
    public mutating func scan(_ feed: ChangeFeed, limit: Int, scanLimit: Int = 65_536) throws(FeedReadError) -> FeedScan {
        // A restarted feed (a peer's snapshot replaced the state) expires every reader of the
        // state before, caught up or not: the jump has no events.
        if feed.firstPosition > position || feed.generation != generation { throw .expired(floor: feed.floor) }
        var positions = [UInt64]()
        var scanned = 0
        let end = feed.endPosition
        let everything = filter.vendors == nil && filter.kinds == nil
        var last: (log: LogID, sequence: UInt64)?
        while position < end {
            let (log, sequence, matches) = feed.withEntry(at: position) { entry in
                (entry.log, entry.sequence, everything ? entry.event != .erased : filter.matches(entry.event))
            }
            // A read stops at its limits, inside an operation too: one operation may give more
            // events than a frame may carry (a vendor's binding-policy change states every account).
            if positions.count >= limit || scanned >= scanLimit { break }
            // The cursor rises once per run of one log (a log's sequences only grow in the feed).
            if let last, last.log != log { seen.raise(to: last.sequence, in: last.log) }
            last = (log, sequence)
            if matches { positions.append(position) }
            position += 1
            scanned += 1
        }
        if let last {
            // The cursor names operations, not events: stopped inside an operation, it covers only
            // the ones before (the log's earlier sequences all came before in the feed), and a
            // watcher that resumes from it is given that operation's events again.
            let inside = position < end && feed.withEntry(at: position) { $0.log == last.log && $0.sequence == last.sequence }
            seen.raise(to: inside ? last.sequence - 1 : last.sequence, in: last.log)
        }
        if position >= end { seen = seen.joined(with: feed.published) }
        return FeedScan(positions: positions, cursor: cursor)
    }
}
