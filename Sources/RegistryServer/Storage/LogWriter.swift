import Platform
import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Makes group commits durable on one serial queue: it encodes their operations into the
/// ``CommitJournal``'s buffer as one entry, then writes and syncs it (one write and one sync; a
/// commit past ``entryBytes`` as several entries, each written and synced in turn).
/// What that makes durable is the commit pipeline's to record (``DurableState``).
///
/// `@unchecked Sendable`: its mutable state (`journal`) is touched solely by closures that run on `queue` (a serial DispatchQueue), `close` included
/// (through `queue.sync`); `init` sets it before any closure exists.
final class LogWriter: @unchecked Sendable {
    let queue = DispatchQueue(label: "registry.log-writer")
    private var journal: CommitJournal?

    /// Starts journal file `journalFile` in `directory`.
    init(fs: any FileSystem, directory: String, journalFile: UInt64, fileBytes: Int, index: JournalIndex) throws(StorageError) {
        journal = try CommitJournal(fs: fs, directory: directory, number: journalFile, rotationBytes: fileBytes, index: index)
    }

    /// Records per segment at most, so that a long commit pass (a stalled disk) still
    /// writes segments of about a megabyte rather than one huge blob.
    static let segmentRecords = 4096

    /// What a commit's write did: how long the journal's write and sync took, and the records it
    /// wrote when asked for them, a run of one log for each segment of the entry.
    struct Written {
        let syncMicros: UInt64
        let runs: [[LogRecord]]
    }

    /// The bytes of one journal entry past which a commit goes on in another entry: well under
    /// ``JournalEntry``'s largest readable payload (1 GiB), with room for the operation that
    /// crosses it (an operation is at most a frame). A pass that big is a stalled disk behind
    /// thousands of pipelined batches; written as one entry, recovery would refuse it as torn.
    static let entryBytes = 256 << 20

    /// Durably appends `operations`, with the clock, as one journal entry (or, past
    /// `entryBytes`, as several, each written and synced in turn, all before it returns): the
    /// operations of each (origin, epoch) run become a segment, each encoded straight into the
    /// journal's buffer (``JournalEntryWriter``), or copied there as it came when it came in a
    /// peer's batch (``LoggedOperation/encoded``). With `keepingRecords`, also returns the
    /// records as written (for ``RecentOperations``).
    func write(
        _ operations: [LoggedOperation], clock: HLCTimestamp, keepingRecords: Bool, entryBytes: Int = entryBytes
    ) -> Result<Written, StorageError> {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let journal else { return .failure(.corrupt("the log is closed")) }
        var next = 0
        var syncNanos: UInt64 = 0
        var runs = [[LogRecord]]()
        do {
            repeat {
                let first = next
                // Where each segment of the entry starts in `operations`.
                var segmentStarts = [Int]()
                syncNanos += try journal.append(clock: clock.rawValue) { entry in
                    // Each operation is read in place through the array: binding it to a loop
                    // variable would copy it, retaining and releasing its bytes and arrays.
                    while next < operations.count, next == first || entry.entryBytes < entryBytes {
                        let index = next
                        let origin = operations[index].origin.value
                        let epoch = operations[index].epoch
                        let continues = entry.openSegment.map { $0.origin == origin && $0.epoch == epoch && $0.count < Self.segmentRecords }
                        if continues != true {
                            entry.startSegment(origin: origin, epoch: epoch)
                            segmentStarts.append(index)
                        }
                        entry.appendRecord(sequence: operations[index].sequence, hlc: operations[index].timestamp.rawValue) { bytes in
                            // A peer's operation is written as it came (the sender's journal's bytes).
                            if let encoded = operations[index].encoded {
                                bytes.append(contentsOf: encoded)
                            } else {
                                OperationCodec.encode(operations[index].operation, appendingTo: &bytes)
                            }
                        }
                        next += 1
                    }
                }
                guard keepingRecords else { continue }
                precondition(segmentStarts.count == journal.lastEntrySegmentCount, "a segment the log writer did not start")
                for segment in segmentStarts.indices {
                    let end = segment + 1 < segmentStarts.count ? segmentStarts[segment + 1] : next
                    runs.append(Self.recordsAsTheyCame(operations, segmentStarts[segment]..<end) ?? journal.lastEntryRecords(ofSegment: segment))
                }
            } while next < operations.count
            return .success(Written(syncMicros: syncNanos / 1_000, runs: runs))
        } catch {
            return .failure(error)
        }
    }

    /// The records of operations `range`, when every one of them came in a peer's batch: the
    /// bytes they came in are what the journal wrote, so each record's payload is a slice of them,
    /// with no copy of the entry to take and parse again. Nil when one of them was made here.
    private static func recordsAsTheyCame(_ operations: [LoggedOperation], _ range: Range<Int>) -> [LogRecord]? {
        guard range.allSatisfy({ operations[$0].encoded != nil }) else { return nil }
        var records = [LogRecord]()
        records.reserveCapacity(range.count)
        for index in range {
            records.append(
                LogRecord(
                    origin: operations[index].origin.value, epoch: operations[index].epoch, sequence: operations[index].sequence,
                    hlc: operations[index].timestamp.rawValue, payload: operations[index].encoded!))
        }
        return records
    }

    /// A snapshot from a peer was installed: the journal goes on in a new file, so that no file
    /// holds both sides of what the snapshot covers.
    func installedSnapshot() throws(StorageError) {
        try rotateNow()
    }

    /// Goes on in a new journal file (when the current one holds anything), so that the current
    /// one can be trimmed once snapshots cover it.
    func rotateNow() throws(StorageError) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let journal else { throw .corrupt("the log is closed") }
        try journal.rotateNow()
    }

    /// The number of the journal file being appended to; `.max` once closed (none is).
    var currentFile: UInt64 {
        dispatchPrecondition(condition: .onQueue(queue))
        return journal?.fileNumber ?? .max
    }

    /// Closes the journal after queued writes finish.
    func close() {
        queue.sync { journal = nil }
    }
}
