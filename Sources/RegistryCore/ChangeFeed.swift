/// One ``FeedEvent`` with the operation whose application gave it: (origin, epoch, sequence)
/// names the operation on every node.
public struct FeedEntry: Hashable, Sendable {
    public let log: LogID
    public let sequence: UInt64
    /// The operation's timestamp.
    public let time: HLCTimestamp
    public let event: FeedEvent

    public init(log: LogID, sequence: UInt64, time: HLCTimestamp, event: FeedEvent) {
        self.log = log
        self.sequence = sequence
        self.time = time
        self.event = event
    }
}

/// The events a node has applied and made durable, in its apply order, the newest `capacity` or
/// so of them: what its watchers read (`docs/cluster.md`, "Watching changes"). A plain value.
///
/// Each event has a position, counted from the feed's start and never reused. Events arrive in
/// batches, one per commit, each recorded with what the node held before it (``published`` then):
/// every event of a later batch came of an operation applied after everything that vector names.
/// That is what lets a watcher resume from a version vector alone, on any node:
///
/// - a cursor that covers what the feed dropped (``floor``) resumes at the last batch whose
///   `before` the cursor covers (the events before it came of operations the cursor holds), and
///   gets every event from there, some perhaps again;
/// - a cursor that does not cover ``floor`` names a state whose later events are gone: expired.
///
/// Events are dropped a whole batch at a time, oldest first, once more than `capacity` are held.
///
/// A forget erases what the feed held of the forgotten devices' accounts (`docs/security.md`):
/// every account event (bound, unbound) of an operation before the forget that names one of its
/// devices, of an account the forget's own events state again, becomes ``FeedEvent/erased``,
/// which readers pass over. Those events of the forget state each such account as it is after
/// it, so a watcher that folds the feed from before the forget ends where the node is, as it did
/// when it read them.
public struct ChangeFeed: Sendable {
    /// Events held at most (a batch bigger than that is held alone until the next).
    public let capacity: Int
    private var entries: FeedPages
    /// Position of the oldest event held.
    public private(set) var firstPosition: UInt64 = 0
    /// Each batch held: its first event's position, and what the node held before it.
    private var batches: [(position: UInt64, before: VersionVector)] = []
    private var batchHead = 0
    /// What a cursor must cover to resume: the operations whose events were dropped, or came
    /// before the feed started.
    public private(set) var floor: VersionVector
    /// Every operation whose events the feed holds or held: what the node had made durable at
    /// the last ``publish(_:through:)``.
    public private(set) var published: VersionVector
    /// Counts ``restart(holding:)``s: a reader of an earlier generation read a state that is gone.
    public private(set) var generation = 0
    /// Where the account events held are, by account: what a forget looks up.
    private var accountEvents = AccountEventIndex()

    /// An empty feed of a node that holds `vector` (its state is what came before: the start is
    /// the floor). Its pages of events come from `pages` (see ``FeedPages``).
    public init(capacity: Int, holding vector: VersionVector, pages: any TableAllocator = HeapTableAllocator()) {
        precondition(capacity > 0, "a feed holds at least one event")
        self.capacity = capacity
        entries = FeedPages(allocator: pages)
        floor = vector
        published = vector
    }

    /// The position the next event will have.
    public var endPosition: UInt64 { firstPosition + UInt64(entries.count) }

    /// Events held.
    public var count: Int { entries.count }

    /// Adds the events of one commit, in apply order, after which the node holds `vector`;
    /// returns the positions of the events its forgets erased (see ``ChangeFeed``), oldest first.
    @discardableResult
    public mutating func publish(_ events: [FeedEntry], through vector: VersionVector) -> [UInt64] {
        var erased = [UInt64]()
        if !events.isEmpty {
            let start = endPosition
            batches.append((start, published))
            entries.append(contentsOf: events)
            // By index, binding the payload of account events and forgets alone: nearly every
            // event is neither, and is not copied.
            for index in events.indices {
                switch events[index].event {
                case .bound(let account, _, _), .unbound(let account, _, _, _):
                    accountEvents.add(account, at: start + UInt64(index))
                case .forgotten(let devices, _):
                    erased += erase(forgetAt: index, of: events, from: start, devices: Set(devices))
                default: break
                }
            }
        }
        published = vector
        trim()
        return erased.count > 1 ? erased.sorted() : erased
    }

    /// Erases, for the forget at `index` of `events` (published from position `start` on), the
    /// earlier account events that name any of `devices`, of the accounts its own events state
    /// again; their positions, in no order. Only those: a forget whose set was gone already (a second forget,
    /// or a device merged into a gone set) states no account, and must not erase what the first
    /// forget said of them, nor what binds that arrived after it said.
    private mutating func erase(forgetAt index: Int, of events: [FeedEntry], from start: UInt64, devices: Set<DeviceID>) -> [UInt64] {
        // The forget's own events, before this one, stay: they state the accounts now.
        let (log, sequence) = (events[index].log, events[index].sequence)
        var first = index
        var restated = Set<AccountKey>()
        while first > 0, events[first - 1].log == log, events[first - 1].sequence == sequence {
            first -= 1
            switch events[first].event {
            case .bound(let account, _, _), .unbound(let account, _, _, _): restated.insert(account)
            default: break
            }
        }
        var erased = [UInt64]()
        // By account ID: two restated accounts of one ID (a vendor move joined their vendors)
        // look up the same positions once.
        var seen = Set<UUID128>()
        for account in restated where seen.insert(account.account).inserted {
            for position in accountEvents.positions(of: account, from: firstPosition, before: start + UInt64(first)) {
                let offset = Int(position - firstPosition)
                guard entries.withEntry(at: offset, { $0.event.namesAccount(with: devices) }) else { continue }
                let entry = entries[offset]
                entries.replace(at: offset, with: FeedEntry(log: entry.log, sequence: entry.sequence, time: entry.time, event: .erased))
                erased.append(position)
            }
        }
        return erased
    }

    /// A state installed from elsewhere (a peer's snapshot) replaced the node's, which holds
    /// `vector` now: every event held is dropped, and only a cursor that covers `vector` resumes.
    public mutating func restart(holding vector: VersionVector) {
        generation += 1
        firstPosition = endPosition
        entries.removeAll()
        batches = []
        batchHead = 0
        accountEvents.removeAll()
        floor = vector
        published = vector
    }

    /// The position a watcher that has seen every event of `cursor`'s operations resumes at;
    /// nil when events it has not seen were dropped.
    public func start(after cursor: VersionVector) -> UInt64? {
        guard cursor.covers(floor) else { return nil }
        var position = firstPosition
        // `before` grows from batch to batch: the ones the cursor covers come first.
        for index in batchHead..<batches.count {
            guard cursor.covers(batches[index].before) else { break }
            position = batches[index].position
        }
        return position
    }

    /// The position from which every event came of an operation applied after the node held all
    /// of `cursor`'s: the first batch whose `before` covers it, or else the end (the node must
    /// hold the cursor: ``published`` covers it). A watcher that resumed from `cursor` holds this
    /// node's view once it has read to here (``FeedReader``).
    public func heldPosition(of cursor: VersionVector) -> UInt64 {
        for index in batchHead..<batches.count where batches[index].before.covers(cursor) { return batches[index].position }
        return endPosition
    }

    /// The event at `position`, which must be held.
    public subscript(position: UInt64) -> FeedEntry {
        precondition(position >= firstPosition && position < endPosition, "position \(position) is not held")
        return entries[Int(position - firstPosition)]
    }

    /// `body`'s answer about the event at `position`, which must be held, lent rather than copied.
    public func withEntry<Result>(at position: UInt64, _ body: (borrowing FeedEntry) -> Result) -> Result {
        precondition(position >= firstPosition && position < endPosition, "position \(position) is not held")
        return entries.withEntry(at: Int(position - firstPosition), body)
    }

    /// Drops the oldest batches while more than `capacity` events are held, keeping the newest one.
    private mutating func trim() {
        guard count > capacity else { return }
        while count > capacity, batchHead < batches.count - 1 {
            let next = batches[batchHead + 1].position
            entries.dropFirst(Int(next - firstPosition))
            firstPosition = next
            batchHead += 1
        }
        floor = batches[batchHead].before
        accountEvents.dropBelow(firstPosition)
        // Compacted when the dropped part outgrows what is held, so each batch moves O(1) times.
        if batchHead > batches.count / 2 {
            batches.removeFirst(batchHead)
            batchHead = 0
        }
    }
}
