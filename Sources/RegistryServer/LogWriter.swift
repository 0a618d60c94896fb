import Dispatch
import RegistryCore
import RegistryStorage

/// Makes group commits durable on one serial queue: it appends their encoded operations to the
/// ``CommitJournal`` (one pwrite and one fdatasync). That is the only write a commit
/// costs while the node runs: the journal keeps every commit until the next start-up moves them
/// into the SQLite ``OperationLog`` (see `RegistryEngine`).
///
/// `@unchecked Sendable`: its mutable state (`journal`, `log`, `directory`, `durableRecords`) is
/// touched solely by closures that run on `queue` (a serial DispatchQueue), `close` included
/// (through `queue.sync`); `init` sets it before any closure exists.
final class LogWriter: @unchecked Sendable {
    let queue = DispatchQueue(label: "registry.log-writer")
    private var journal: CommitJournal?
    /// Held until ``close()``: the directory for its lock, and the log (which the writer never
    /// writes) so that SQLite keeps its WAL files while the node runs. A node that crashes then
    /// restarts with them in place, and on a full disk fails at moving its journal, which says
    /// how many operations wait there, rather than at creating a WAL file.
    private var log: OperationLog?
    private var directory: DataDirectory?
    /// Records in the log or the journal.
    private var durableRecords: UInt64

    /// Starts journal file `journalFile` in `directory`, whose `log` holds every earlier record
    /// (the previous run's journal was moved into it).
    init(log: OperationLog, directory: DataDirectory, journalFile: UInt64) throws(StorageError) {
        journal = try CommitJournal(directory: directory, number: journalFile)
        durableRecords = log.recordCount
        self.log = log
        self.directory = directory
    }

    /// Durably appends `segments` (``OperationSegments``), `records` operations in all, with the
    /// clock, as one journal entry. Returns the number of durable records, and how many
    /// microseconds the journal's write and sync took.
    func write(_ segments: [LogSegment], records: Int, clock: HLCTimestamp) -> Result<(durable: UInt64, syncMicros: UInt64), StorageError> {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let journal else { return .failure(.corrupt("the log is closed")) }
        let entry = JournalEntry(segments: segments, clock: clock.rawValue)
        do {
            let started = DispatchTime.now().uptimeNanoseconds
            try journal.append(entry)
            let syncMicros = (DispatchTime.now().uptimeNanoseconds - started) / 1_000
            durableRecords += UInt64(records)
            return .success((durableRecords, syncMicros))
        } catch {
            return .failure(error)
        }
    }

    /// Closes the journal and the log (releasing the data directory's lock) after queued writes
    /// finish. The journal files stay for the next start-up to move into the log.
    func close() {
        queue.sync {
            journal = nil
            log = nil
            directory = nil
        }
    }
}
