/// The events of operations a node has applied but not yet published to its ``ChangeFeed``:
/// those not durable yet, or, in a replay, those of the journal entry being read.
public struct FeedStaging: Sendable {
    public private(set) var entries: [FeedEntry] = []

    public init() {}

    /// Takes the entries of the operations `vector` holds: a prefix, since a node applies each
    /// log in order and makes its applied operations durable in the order it applied them.
    public mutating func take(heldBy vector: VersionVector) -> [FeedEntry] {
        // Most often every staged operation is in the commit: when the last one applied is, all
        // are (the prefix above), taken without a copy.
        if let last = entries.last, last.sequence <= vector[last.log] { return takeAll() }
        var end = 0
        var last: (log: LogID, held: UInt64)?
        while end < entries.count {
            // Read in place: a copy of the entry would retain and release its event's strings.
            // One lookup per run of one log.
            if last?.log != entries[end].log { last = (entries[end].log, vector[entries[end].log]) }
            guard entries[end].sequence <= last!.held else { break }
            end += 1
        }
        guard end > 0 else { return [] }
        // The entries after the prefix are moved out of the buffer, which is then the prefix
        // and is returned: `popLast`, `append` and `reverse` move entries, where copying the
        // prefix out and removing it from the front retains and releases every event's strings.
        // A commit is most often a step behind the decisions, so this is the usual path.
        var taken = entries
        entries = []
        entries.reserveCapacity(taken.count)
        while taken.count > end { entries.append(taken.popLast()!) }
        entries.reverse()
        return taken
    }

    /// Takes every entry.
    public mutating func takeAll() -> [FeedEntry] {
        let taken = entries
        // The next commit's entries start in a buffer the size of this one's.
        entries = []
        entries.reserveCapacity(taken.count)
        return taken
    }

    mutating func append(_ entry: FeedEntry) {
        entries.append(entry)
    }
}

extension RegistryState {
    /// Moves the events recorded since the last call to `staging`, as events of operation
    /// `sequence` of `log`, stamped `time`.
    public mutating func moveEvents(to staging: inout FeedStaging, log: LogID, sequence: UInt64, time: HLCTimestamp) {
        guard feedRecording != nil, !feedRecording!.events.isEmpty else { return }
        // Taken out and put back emptied, so that the buffer stays uniquely held and is reused
        // (emptying a copy that is still shared would allocate a new one every operation).
        var events = feedRecording!.events
        feedRecording!.events = []
        // Moved out one by one from the back (`popLast`, after a `reverse` that moves too): a
        // `for` loop copies each event and the emptying releases it, a retain and a release of
        // each of its strings.
        events.reverse()
        while let event = events.popLast() { staging.append(FeedEntry(log: log, sequence: sequence, time: time, event: event)) }
        feedRecording!.events = events
    }
}
