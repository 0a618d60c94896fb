/// Moving one journal file's commits into the ``OperationLog``, in as many transactions as the
/// caller likes: a starting node moves a whole file in one, and a serving node moves it a few
/// segments at a time so that no write of its own holds the disk for long.
///
/// Every transaction is durable on its own and the log skips records it holds, so a move cut
/// short (by a crash, a full disk, or a stop) is simply made again from the file's start.
public struct JournalFileMove {
    /// The file's commits, joined into segments of up to ``JournalEntry/mergedSegmentRecords``.
    private let merged: JournalEntry
    /// The first segment not yet in the log.
    private var next = 0

    /// The move of `entries`, one journal file's, oldest first.
    public init(_ entries: [JournalEntry]) {
        merged = JournalEntry.merging(entries)
    }

    /// Operations the file holds.
    public var operations: Int { merged.segments.reduce(0) { $0 + $1.count } }

    /// True once every segment is in the log.
    public var isFinished: Bool { next == merged.segments.count }

    /// Appends up to `segments` more segments to `log` in one durable transaction, with the
    /// file's clock (never newer than what this node had persisted or acknowledged), and returns
    /// how many operations they held.
    @discardableResult
    public mutating func moveNext(into log: OperationLog, segments: Int = .max) throws(StorageError) -> Int {
        let end = next + min(segments, merged.segments.count - next)
        let batch = Array(merged.segments[next..<end])
        try log.append(batch, clock: merged.clock)
        next = end
        return batch.reduce(0) { $0 + $1.count }
    }
}
