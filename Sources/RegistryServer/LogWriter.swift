import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Makes group commits durable on one serial queue: it encodes their operations and appends them
/// to the ``CommitJournal`` (one pwrite and one fdatasync). That is the only write a commit
/// costs: the ``JournalMover`` moves finished journal files into the SQLite ``OperationLog``
/// while the node is quiet, and the next start-up moves the rest (see `RegistryEngine`).
///
/// `@unchecked Sendable`: its mutable state (`journal`, `directory` and `durableRecords`) is
/// touched solely by closures that run on `queue` (a serial DispatchQueue), `close` included
/// (through `queue.sync`); `init` sets it before any closure exists.
final class LogWriter: @unchecked Sendable {
    let queue = DispatchQueue(label: "registry.log-writer")
    private var journal: CommitJournal?
    /// Held until ``close()``, for the data directory's lock.
    private var directory: DataDirectory?
    /// Records in the log or the journal.
    private var durableRecords: UInt64

    /// Starts journal file `journalFile` in `directory`, whose log holds `durableRecords` records
    /// (the previous run's journal was moved into it).
    init(directory: DataDirectory, journalFile: UInt64, durableRecords: UInt64, fileBytes: Int, spares: SpareJournalMaker)
        throws(StorageError)
    {
        journal = try CommitJournal(directory: directory, number: journalFile, rotationBytes: fileBytes, spares: spares)
        self.durableRecords = durableRecords
        self.directory = directory
    }

    /// Records per segment at most, so that a long commit pass (a stalled disk) still
    /// writes segments of about a megabyte rather than one huge blob.
    static let segmentRecords = 4096

    /// What a commit made durable, and where the journal stands after it.
    struct Committed {
        /// Records in the log or the journal.
        let durable: UInt64
        /// How long the journal's write and sync took.
        let syncMicros: UInt64
        /// Bytes and files of journal this run has written (see ``CommitJournal/bytesWritten``).
        let journalBytes: UInt64
        let journalFiles: UInt64
    }

    /// Encodes and durably appends `operations`, with the clock, as one journal entry: the
    /// operations of each (origin, epoch) run become a ``LogSegment``.
    func write(_ operations: [LoggedOperation], clock: HLCTimestamp) -> Result<Committed, StorageError> {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let journal else { return .failure(.corrupt("the log is closed")) }
        var segments = [LogSegment]()
        // Each operation is read in place through the array: binding it to a loop variable would
        // copy it, retaining and releasing every one of its strings and arrays.
        for index in operations.indices {
            let origin = operations[index].origin.value
            let epoch = operations[index].epoch
            let startsSegment = segments.last.map { $0.origin != origin || $0.epoch != epoch || $0.count == Self.segmentRecords }
            if startsSegment ?? true {
                segments.append(
                    LogSegment(origin: origin, epoch: epoch, reservingBytes: 200 * min(operations.count, Self.segmentRecords)))
            }
            segments[segments.count - 1].append(sequence: operations[index].sequence, hlc: operations[index].timestamp.rawValue) {
                OperationCodec.encode(operations[index].operation, appendingTo: &$0)
            }
        }
        let entry = JournalEntry(segments: segments, clock: clock.rawValue)
        do {
            let started = DispatchTime.now().uptimeNanoseconds
            try journal.append(entry)
            let syncMicros = (DispatchTime.now().uptimeNanoseconds - started) / 1_000
            durableRecords += UInt64(operations.count)
            return .success(
                Committed(
                    durable: durableRecords, syncMicros: syncMicros, journalBytes: journal.bytesWritten,
                    journalFiles: journal.filesStarted))
        } catch {
            return .failure(error)
        }
    }

    /// Closes the journal after queued writes finish. The files not moved yet stay for the next
    /// start-up to move into the log.
    func close() {
        queue.sync {
            journal = nil
            directory = nil
        }
    }
}
