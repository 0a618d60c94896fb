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
            let entry = entries[end]
            // One lookup per run of one log.
            if last?.log != entry.log { last = (entry.log, vector[entry.log]) }
            guard entry.sequence <= last!.held else { break }
            end += 1
        }
        guard end > 0 else { return [] }
        defer { entries.removeFirst(end) }
        return Array(entries[..<end])
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
        for event in events { staging.append(FeedEntry(log: log, sequence: sequence, time: time, event: event)) }
        events.removeAll(keepingCapacity: true)
        feedRecording!.events = events
    }
}
