/// One finished journal file (closed by its rotation marker) on its way into the
/// ``OperationLog``, a short step at a time, holding little of it in memory: a step either reads
/// another piece of the file and joins its entries into segments, or moves a few complete
/// segments into the log in one transaction. A serving node uses it to move its finished files
/// (see `JournalMover`); a starting node moves whole files at once instead.
///
/// Every transaction is durable on its own (or at the log's next checkpoint, see
/// ``OperationLog/deferDurabilityToCheckpoints()``) and the log skips records it holds, so a
/// transfer cut short (a crash, a stop, an error) is simply made again from the file's start.
///
/// Not thread-safe: one owner steps it.
public final class JournalFileTransfer {
    /// What a step did.
    public enum Step: Equatable, Sendable {
        /// Read a piece of the file.
        case read
        /// Moved this many operations into the log.
        case moved(operations: Int)
        /// Nothing: every operation is in the log.
        case finished
    }

    /// The journal file's number.
    public let number: UInt64
    private let reader: JournalFileReader
    private var merger = SegmentMerger()
    /// Where in the reader's unparsed bytes the next record starts.
    private var parsed = 0
    /// True once the rotation marker was read.
    private var isRead = false
    /// The bytes the file's records and marker take (what ``CommitJournal/bytesWritten`` counted
    /// for it), known once the marker was read.
    public private(set) var bytes: UInt64 = 0
    /// Operations moved so far.
    public private(set) var operationsMoved = 0

    /// A transfer of journal file `number` in `directory`, which the writer must have finished.
    public init(directory: DataDirectory, number: UInt64) throws(StorageError) {
        self.number = number
        reader = try JournalFileReader(path: CommitJournal.path(in: directory, number: number), readahead: false)
    }

    /// Bytes read and not yet joined into segments (for tests).
    var unparsedBytes: Int { reader.bytes.count }
    /// Segments joined and not yet moved (for tests).
    var pendingSegments: Int { merger.segments.count }

    /// True once every operation of the file is in the log.
    public var isFinished: Bool { isRead && merger.segments.isEmpty }

    /// Moves up to `segments` complete segments into `log` when that many are ready (or whatever
    /// is left once the whole file is read); otherwise reads up to `readBytes` more of the file.
    /// Throws ``StorageError/corrupt(_:)`` for a file that does not end with its rotation marker.
    public func step(into log: OperationLog, segments: Int, readBytes: Int) throws(StorageError) -> Step {
        let ready = isRead ? merger.segments.count : merger.completeCount
        if ready > 0, ready >= segments || isRead {
            let count = min(segments, ready)
            let batch = Array(merger.segments.prefix(count))
            try log.append(batch, clock: merger.clock)
            merger.removeFirst(count)
            let operations = batch.reduce(0) { $0 + $1.count }
            operationsMoved += operations
            return .moved(operations: operations)
        }
        if isRead { return .finished }
        try reader.read(upTo: readBytes)
        try parse()
        return .read
    }

    /// Joins the whole records read so far into the merger and lets the reader drop their bytes.
    private func parse() throws(StorageError) {
        defer {
            reader.discard(parsed)
            parsed = 0
        }
        while true {
            let read = reader.bytes.withUnsafeBytes { raw in
                Result { () throws(StorageError) in try JournalEntry.read(raw, at: parsed, file: number) }
            }
            switch try read.get() {
            case .entry(let entry, let next):
                merger.add(entry)
                parsed = next
            case .rotated:
                isRead = true
                bytes = UInt64(reader.discarded + parsed + JournalEntry.headerBytes)
                parsed += JournalEntry.headerBytes
                return
            case .torn where !reader.isAtEnd, .end where !reader.isAtEnd && parsed == reader.bytes.count:
                return  // the rest of the record is still to be read
            case .torn(let reason):
                throw .corrupt("journal file \(reader.path) does not end with its rotation marker (\(reason) at byte \(reader.discarded + parsed))")
            case .end:
                throw .corrupt("journal file \(reader.path) does not end with its rotation marker (its records stop at byte \(reader.discarded + parsed))")
            }
        }
    }
}
