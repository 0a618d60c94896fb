import Dispatch
import Logging
import RegistryStorage
import Synchronization

/// Moves the journal files a serving node has finished (closed by a rotation) into its SQLite
/// ``OperationLog`` while the node is quiet (see ``JournalMovePolicy``), oldest first, a couple of
/// segments per transaction, each followed by a checkpoint and a rest as long as the step took.
/// Once a file's operations are all durable in the log, the file is retired: it becomes the spare
/// that a later rotation writes over. So the journal stops growing for a node's whole uptime, and
/// the next start-up has only what was written since the node was last quiet to move.
///
/// It never touches the file the writer appends to. A move cut short (a crash, a stop) leaves the
/// file in place, and the next start-up moves it again, which the log makes idempotent. A move
/// that fails (a full disk, a damaged file) is logged and moving stops for this run: every
/// commit stays durable in the journal, and the next start-up moves it or says why it cannot.
///
/// `@unchecked Sendable`: `log`, `directory`, `policy`, `nextFile`, `moving` and `stopped` are
/// touched only by closures that run on `queue` (serial), `close` included (through
/// `queue.sync`); `init` sets them before any closure exists. What other threads share is
/// atomic (`reachedOperations`, `filesStarted`, `movedBytes`, `movedFiles`, `closed`).
final class JournalMover: @unchecked Sendable {
    private let queue = DispatchQueue(label: "registry.journal-mover", qos: .utility)
    private var log: OperationLog?
    private var directory: DataDirectory?
    private var policy: JournalMovePolicy
    /// The number of this run's first journal file.
    private let firstFile: UInt64
    /// The oldest file not moved yet.
    private var nextFile: UInt64
    /// The file being moved, once read.
    private var moving: (file: CommitJournal.FinishedFile, move: JournalFileMove)?
    private var stopped = false
    private let logger: Logger

    /// The node's durable operations and journal files started, as of its last commit.
    private let reachedOperations = Atomic<UInt64>(0)
    private let filesStarted = Atomic<UInt64>(0)
    /// Journal bytes and files moved into the log and retired.
    private let movedBytes = Atomic<UInt64>(0)
    private let movedFiles = Atomic<UInt64>(0)
    private let closed = Atomic<Bool>(false)

    /// A mover for the journal that starts at file `firstFile` this run, into `log`, which it
    /// owns from now on (nothing else may use it). Moves nothing when `quietOperationsPerSecond`
    /// is 0.
    init(log: OperationLog, directory: DataDirectory, firstFile: UInt64, quietOperationsPerSecond: Int, logger: Logger) {
        self.log = log
        self.directory = directory
        self.firstFile = firstFile
        self.nextFile = firstFile
        self.policy = JournalMovePolicy(quietOperationsPerSecond: quietOperationsPerSecond)
        self.logger = logger
        reachedOperations.store(log.recordCount, ordering: .relaxed)
        if quietOperationsPerSecond > 0 { schedule(afterNanos: JournalMovePolicy.idleIntervalNanos) }
    }

    /// Called after each commit with the node's durable operations and the journal files this
    /// run has started (the last is the one being appended to; every earlier one is finished).
    func noteCommit(durableOperations: UInt64, journalFiles: UInt64) {
        reachedOperations.store(durableOperations, ordering: .relaxed)
        filesStarted.store(journalFiles, ordering: .releasing)
    }

    /// Journal bytes and files moved into the log (and retired) so far.
    var moved: (bytes: UInt64, files: UInt64) {
        (movedBytes.load(ordering: .relaxed), movedFiles.load(ordering: .relaxed))
    }

    /// Stops moving, waits for a step under way, and lets go of the log and the directory.
    func close() {
        closed.store(true, ordering: .relaxed)
        queue.sync {
            moving = nil
            log = nil
            directory = nil
        }
    }

    private func schedule(afterNanos nanos: UInt64) {
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanos))) { self.tick() }
    }

    /// One look: takes a reading, and when there is a finished file and the node is quiet, does
    /// one step of moving; then comes back after the policy's rest.
    private func tick() {
        guard !closed.load(ordering: .relaxed), !stopped, let log, let directory else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        policy.observe(nanos: now, operations: reachedOperations.load(ordering: .relaxed))
        let started = filesStarted.load(ordering: .acquiring)
        let finished = started > 0 ? firstFile + started - 1 : firstFile
        guard moving != nil || nextFile < finished, policy.isQuiet else {
            return schedule(afterNanos: JournalMovePolicy.idleIntervalNanos)
        }
        do {
            try step(log: log, directory: directory)
        } catch {
            stopped = true
            logger.error(
                "cannot move a finished journal file into the SQLite log while serving; it stays for the next start-up",
                metadata: ["file": "\(nextFile)", "error": "\(error)"])
            return
        }
        schedule(afterNanos: JournalMovePolicy.pause(afterStepOf: DispatchTime.now().uptimeNanoseconds - now))
    }

    /// Reads the next finished file, or moves a few more of its segments; after its last, the
    /// file is retired.
    private func step(log: OperationLog, directory: DataDirectory) throws(StorageError) {
        guard var current = moving else {
            let file = try CommitJournal.readFinished(in: directory, number: nextFile)
            moving = (file, JournalFileMove(file.entries))
            return
        }
        try current.move.moveNext(into: log, segments: JournalMovePolicy.segmentsPerTransaction)
        try log.checkpoint()
        guard current.move.isFinished else {
            moving = current
            return
        }
        try CommitJournal.retire(in: directory, below: current.file.number + 1)
        moving = nil
        nextFile = current.file.number + 1
        movedBytes.wrappingAdd(current.file.bytes, ordering: .relaxed)
        movedFiles.wrappingAdd(1, ordering: .relaxed)
        logger.debug(
            "moved a finished journal file into the SQLite log",
            metadata: ["file": "\(current.file.number)", "operations": "\(current.move.operations)"])
    }
}
