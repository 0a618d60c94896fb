/// What waits to become durable, in the order it was decided: a pure value, which
/// ``RegistryEngine`` keeps under its lock and its commit loop carries out.
///
/// Each request that changes the state reserves a ticket while it holds the lock, in the order
/// the changes were applied, and leaves with its operations still unencoded. Its event loop
/// encodes them outside the lock and then fills the ticket. A commit pass takes only the
/// filled tickets that follow the last one taken without a gap: an operation is never durable
/// before one that was applied earlier, since it may depend on it. Encoding on the event loops
/// instead of the commit thread shortens every commit pass, which every registration waits for.
///
/// Answers wait as `Waiter`s, each until the tickets it may have seen (every ticket reserved
/// up to its last decision) are durable.
struct CommitQueue<Content, Waiter> {
    /// Tickets handed out so far: 1 through `reserved`.
    private(set) var reserved: UInt64 = 0
    /// Tickets that are durable: 1 through `durable`.
    private(set) var durable: UInt64 = 0
    /// Tickets handed to commit passes: 1 through `taken`.
    private(set) var taken: UInt64 = 0
    /// Tickets `taken + 1` through `reserved`: their operation counts and their contents, nil
    /// until filled.
    private var slots: [(records: Int, content: Content?)] = []
    /// Where `slots` starts: the slots before it were taken and are kept empty until the array
    /// is compacted, so that taking a prefix does not move the rest every time.
    private var slotsStart = 0
    private var waiters: [(through: UInt64, waiter: Waiter)] = []
    /// Operations in reserved tickets not yet taken.
    private(set) var pendingRecords = 0

    /// True when a commit pass would find something to take.
    var canTake: Bool { slotsStart < slots.count && slots[slotsStart].content != nil }

    /// True when every reserved ticket is durable: an answer decided now saw nothing undurable.
    var allDurable: Bool { durable == reserved }

    /// Reserves the next ticket for `records` operations.
    mutating func reserve(records: Int) -> UInt64 {
        reserved += 1
        pendingRecords += records
        slots.append((records, nil))
        return reserved
    }

    /// Fills `ticket`, reserved and not filled yet, with its encoded operations.
    mutating func fill(_ ticket: UInt64, with content: Content) {
        precondition(ticket > taken && ticket <= reserved, "ticket \(ticket) is not waiting to be filled")
        let index = slotsStart + Int(ticket - taken - 1)
        precondition(slots[index].content == nil, "ticket \(ticket) was filled twice")
        slots[index].content = content
    }

    /// Takes the filled tickets that follow the last one taken, up to the first unfilled one:
    /// their contents in ticket order and the last ticket taken. Nil when the next is unfilled.
    mutating func take() -> (contents: [Content], through: UInt64)? {
        var contents = [Content]()
        while slotsStart < slots.count, let content = slots[slotsStart].content {
            contents.append(content)
            pendingRecords -= slots[slotsStart].records
            slots[slotsStart].content = nil
            slotsStart += 1
        }
        if slotsStart == slots.count || slotsStart >= 1024 {
            slots.removeFirst(slotsStart)
            slotsStart = 0
        }
        guard !contents.isEmpty else { return nil }
        taken += UInt64(contents.count)
        return (contents, taken)
    }

    /// Queues `waiter` until tickets 1 through `through` are durable; returns it instead when
    /// they already are.
    mutating func wait(_ waiter: Waiter, through: UInt64) -> Waiter? {
        precondition(through <= reserved, "waiting for ticket \(through), which was never reserved")
        if through <= durable { return waiter }
        waiters.append((through, waiter))
        return nil
    }

    /// Records that tickets 1 through `through`, all taken, are durable, and returns the waiters
    /// that no longer wait, in the order they were queued.
    mutating func markDurable(through: UInt64) -> [Waiter] {
        precondition(through <= taken, "ticket \(through) was never taken")
        durable = max(durable, through)
        let limit = durable
        var released = [Waiter]()
        waiters.removeAll { entry in
            guard entry.through <= limit else { return false }
            released.append(entry.waiter)
            return true
        }
        return released
    }

    /// Removes and returns every queued waiter (when the node can no longer commit).
    mutating func removeAllWaiters() -> [Waiter] {
        defer { waiters = [] }
        return waiters.map(\.waiter)
    }
}

extension CommitQueue: Sendable where Content: Sendable, Waiter: Sendable {}
