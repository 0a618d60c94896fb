import RegistryCore
/// Why a log could not be read from where a reader asked.
public enum JournalReadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Operations of `log` up to `trimmedThrough` are no longer in the journal (a snapshot covers
    /// them): the reader must start from a snapshot instead.
    case trimmed(log: LogID, requested: UInt64, trimmedThrough: UInt64)
    case storage(StorageError)

    public var description: String {
        switch self {
        case .trimmed(let log, let requested, let through):
            return "operation \(requested) of \(log) is no longer in the journal (trimmed through \(through)); start from a snapshot"
        case .storage(let error): return error.description
        }
    }
}

/// Follows one log, (origin, epoch), through the journal from a sequence onwards, while the
/// writer keeps appending: each ``next(atMost:)`` returns the following records, in order and
/// without gaps, reading only what is durable (the ``JournalIndex`` says how much of each file is)
/// and holding one journal entry in memory at a time. Files that hold nothing of the log past the
/// position are skipped without reading them. Not thread-safe: one reader per consumer.
public final class JournalReader {
    public let log: LogID
    /// The sequence the next record returned has.
    public private(set) var nextSequence: UInt64
    private let fs: any FileSystem
    private let directory: String
    private let index: JournalIndex
    private var cursor: (file: UInt64, offset: Int)?
    private var open: FileHandle?

    /// A reader of `log` from sequence `from` (at least 1). Throws ``JournalReadError/trimmed``
    /// when trimming already removed it.
    public init(log: LogID, from: UInt64, in directory: String, on fs: any FileSystem, index: JournalIndex) throws(JournalReadError) {
        precondition(from >= 1, "sequences start at 1")
        self.log = log
        self.nextSequence = from
        self.fs = fs
        self.directory = directory
        self.index = index
        try checkNotTrimmed()
    }

    deinit {
        if let open { fs.close(open) }
    }

    /// Up to about `limit` of the log's next records (a whole journal entry's worth may exceed
    /// it), empty when the reader has caught up with what is durable.
    public func next(atMost limit: Int) throws(JournalReadError) -> [LogRecord] {
        try checkNotTrimmed()
        var records = [LogRecord]()
        while records.count < limit {
            guard let file = try currentFile() else { break }
            guard let range = file.ranges[log], range.upperBound >= nextSequence else {
                // Nothing of the log past the position here: on to the next file, unless this one
                // is still being written.
                guard file.sealed else { break }
                try moveTo(after: file.number)
                continue
            }
            let offset = cursor!.offset
            guard offset < file.durableBytes else {
                guard file.sealed else { break }
                try moveTo(after: file.number)
                continue
            }
            let entry: JournalEntry
            let next: Int
            do {
                (entry, next) = try readEntry(of: file, at: offset)
            } catch {
                throw .storage(error)
            }
            cursor = (file.number, next)
            for segment in entry.segments where segment.origin == log.origin.value && segment.epoch == log.epoch {
                guard segment.lastSequence >= nextSequence else { continue }
                let decoded: [LogRecord]
                do {
                    decoded = try segment.records()
                } catch {
                    throw .storage(error)
                }
                for record in decoded where record.sequence >= nextSequence {
                    guard record.sequence == nextSequence else {
                        throw .storage(.corrupt("the journal's log of \(log) goes from \(nextSequence - 1) to \(record.sequence)"))
                    }
                    records.append(record)
                    nextSequence += 1
                }
            }
        }
        return records
    }

    private func checkNotTrimmed() throws(JournalReadError) {
        let trimmed = index.trimmedThrough(log)
        if nextSequence <= trimmed { throw .trimmed(log: log, requested: nextSequence, trimmedThrough: trimmed) }
    }

    /// The index's summary of the file under the cursor, starting at the oldest file that may
    /// hold the position; nil when there is none.
    private func currentFile() throws(JournalReadError) -> JournalIndex.File? {
        if cursor == nil {
            guard let first = index.files.first(where: { ($0.ranges[log]?.upperBound ?? 0) >= nextSequence || !$0.sealed }) else {
                return nil
            }
            cursor = (first.number, 0)
        }
        guard let file = index.file(cursor!.file) else {
            // Trimmed under the reader.
            try checkNotTrimmed()
            cursor = nil
            return try currentFile()
        }
        return file
    }

    private func moveTo(after number: UInt64) throws(JournalReadError) {
        if let open { fs.close(open) }
        open = nil
        guard let following = index.files.first(where: { $0.number > number }) else {
            cursor = (number + 1, 0)
            return
        }
        cursor = (following.number, 0)
    }

    /// Reads the entry at `offset` of `file`, header first, then the rest.
    private func readEntry(of file: JournalIndex.File, at offset: Int) throws(StorageError) -> (JournalEntry, Int) {
        if open == nil || open!.path != CommitJournal.path(in: directory, number: file.number) {
            if let open { fs.close(open) }
            open = try fs.open(CommitJournal.path(in: directory, number: file.number), create: false)
        }
        let header = try fs.read(open!, at: offset, count: JournalEntry.headerBytes)
        guard header.count == JournalEntry.headerBytes else { throw .corrupt("journal file \(file.number) ends inside a durable record") }
        let length = header.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self))) }
        // A damaged length is refused before it sizes a read: the entry lies within what the
        // file made durable.
        guard length <= JournalEntry.maxPayloadBytes, offset + JournalEntry.headerBytes + length <= file.durableBytes else {
            throw .corrupt("journal file \(file.number) is damaged at byte \(offset): a record of \(length) bytes runs past the \(file.durableBytes) durable")
        }
        let whole = try fs.read(open!, at: offset, count: JournalEntry.headerBytes + length)
        let read = whole.withUnsafeBytes { raw in
            Result { () throws(StorageError) in try JournalEntry.read(raw, at: 0, file: file.number) }
        }
        switch try read.get() {
        case .entry(let entry, let next): return (entry, offset + next)
        case .rotated: return (JournalEntry(segments: [], clock: 0), offset + JournalEntry.headerBytes)
        case .torn(let reason): throw .corrupt("journal file \(file.number) is damaged at byte \(offset): \(reason)")
        case .end: throw .corrupt("journal file \(file.number) holds no record at byte \(offset)")
        }
    }
}
