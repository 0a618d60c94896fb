import Platform
import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Makes group commits durable on one serial queue: it encodes their operations and appends them
/// to the ``CommitJournal`` as one entry (one write and one sync), and keeps what is durable of
/// each log, for the snapshots.
///
/// `@unchecked Sendable`: its mutable state (`journal`, `durableOperations`, `durableThrough`) is
/// touched solely by closures that run on `queue` (a serial DispatchQueue), `close` included
/// (through `queue.sync`); `init` sets it before any closure exists.
final class LogWriter: @unchecked Sendable {
    let queue = DispatchQueue(label: "registry.log-writer")
    private var journal: CommitJournal?
    /// Operations durable in the journal or covered by the snapshot start-up loaded.
    private var durableOperations: UInt64
    /// For each log, the highest sequence durable (snapshot or journal).
    private(set) var durableThrough: [LogID: UInt64]

    /// Starts journal file `journalFile` in `directory`.
    init(
        fs: any FileSystem, directory: String, journalFile: UInt64, fileBytes: Int, index: JournalIndex,
        durableThrough: [LogID: UInt64]
    ) throws(StorageError) {
        journal = try CommitJournal(fs: fs, directory: directory, number: journalFile, rotationBytes: fileBytes, index: index)
        self.durableThrough = durableThrough
        self.durableOperations = durableThrough.values.reduce(0, +)
    }

    /// Records per segment at most, so that a long commit pass (a stalled disk) still
    /// writes segments of about a megabyte rather than one huge blob.
    static let segmentRecords = 4096

    /// What a commit made durable, and where the journal stands after it.
    struct Committed {
        /// Operations durable in all.
        let durable: UInt64
        /// How long the journal's write and sync took.
        let syncMicros: UInt64
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
            let started = SystemClock.monotonicNanos()
            try journal.append(entry)
            let syncMicros = (SystemClock.monotonicNanos() - started) / 1_000
            durableOperations += UInt64(operations.count)
            for segment in segments {
                let key = segment.log
                durableThrough[key] = max(durableThrough[key] ?? 0, segment.lastSequence)
            }
            return .success(Committed(durable: durableOperations, syncMicros: syncMicros))
        } catch {
            return .failure(error)
        }
    }

    /// A snapshot from a peer covers `vector`: it counts as durable, and the journal goes on in a
    /// new file, so that no file holds both sides of what the snapshot covers.
    func installed(_ vector: [LogID: UInt64]) throws(StorageError) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let journal else { throw .corrupt("the log is closed") }
        try journal.rotateNow()
        for (log, sequence) in vector where sequence > durableThrough[log] ?? 0 { durableThrough[log] = sequence }
        durableOperations = durableThrough.values.reduce(0, +)
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
