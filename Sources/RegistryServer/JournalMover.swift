import Platform
#if os(Linux)
import CLinuxFile
#endif
import Dispatch
import Foundation
import Logging
import RegistryStorage
import Synchronization

/// Moves the journal files a serving node has finished (closed by a rotation) into its SQLite
/// ``OperationLog`` while the node is quiet (see ``JournalMovePolicy``), oldest first, in short
/// steps with rests between (see ``JournalFileTransfer``): a step reads a megabyte of the file
/// (without readahead), or moves two segments in one transaction followed by a checkpoint. The
/// transactions become durable at that checkpoint (``OperationLog/deferDurabilityToCheckpoints()``),
/// which saves a sync each. Once a file's operations are all in the log and checkpointed, the file
/// is retired: it becomes a spare that a later rotation writes over (or is deleted once the node
/// keeps enough). So the next start-up has only what was written since the node was last quiet to
/// move. While quiet with nothing to move, it has the ``SpareJournalMaker`` make the spares still
/// missing, one at a time (``SpareJournalMaker/topUp()``).
///
/// Moving still costs the commits: their `fdatasync` waits for whatever the disk is writing. With
/// 22 files to move, single registrations at 5,000/s had a p99 of 0.9-1.0 ms without moving;
/// while moving, 6.4-7.8 ms as first built (each file read at once, a sync per transaction and
/// per checkpoint, rests as long as the steps, normal priority), and 0.8-1.1 ms as it is now.
///
/// It works on a thread of its own at `SCHED_IDLE` priority, so that the requests' threads
/// always take the CPU from it (at normal priority the p90 had doubled to 2 ms).
///
/// It never touches the file the writer appends to. A move cut short (a crash, a stop) leaves the
/// file in place, and the next start-up moves it again, which the log makes idempotent. A move
/// that fails (a full disk, a damaged file) is logged and moving stops for this run: every
/// commit stays durable in the journal, and the next start-up moves it or says why it cannot.
///
/// `@unchecked Sendable`: `log`, `directory`, `policy`, `nextFile` and `transfer` are touched by
/// `init`, then only by the mover's thread while it runs, and by ``close()`` only after the
/// thread has signalled `finished` (or when no thread was started); the semaphores order those
/// accesses. What other threads share is atomic (`reachedOperations`, `filesStarted`,
/// `movedBytes`, `movedFiles`, `closed`) or `Sendable` (`spares`).
final class JournalMover: @unchecked Sendable {
    private var log: OperationLog?
    private var directory: DataDirectory?
    private var policy: JournalMovePolicy
    /// The number of this run's first journal file.
    private let firstFile: UInt64
    /// The oldest file not moved yet.
    private var nextFile: UInt64
    /// Keeps the spare journal files.
    private let spares: SpareJournalMaker
    /// The oldest file not moved yet, once its transfer began.
    private var transfer: JournalFileTransfer?
    private let logger: Logger

    /// Ends a rest early, for ``close()``.
    private let wakeUp = DispatchSemaphore(value: 0)
    /// Signalled by the thread as its last act; nil when no thread was started.
    private let finished: DispatchSemaphore?

    /// The node's durable operations and journal files started, as of its last commit.
    private let reachedOperations = Atomic<UInt64>(0)
    private let filesStarted = Atomic<UInt64>(0)
    /// Journal bytes and files moved into the log and retired.
    private let movedBytes = Atomic<UInt64>(0)
    private let movedFiles = Atomic<UInt64>(0)
    private let closed = Atomic<Bool>(false)
    /// Looks taken so far (for tests that wait for the mover to have had its chances).
    private let lookCount = Atomic<UInt64>(0)

    /// A mover for the journal that starts at file `firstFile` this run, into `log`, which it
    /// owns from now on (nothing else may use it). Moves nothing, and starts no thread, when
    /// `quietOperationsPerSecond` is 0.
    init(
        log: OperationLog, directory: DataDirectory, firstFile: UInt64, quietOperationsPerSecond: Int, spares: SpareJournalMaker,
        logger: Logger
    ) {
        self.log = log
        self.directory = directory
        self.firstFile = firstFile
        self.nextFile = firstFile
        self.spares = spares
        self.policy = JournalMovePolicy(quietOperationsPerSecond: quietOperationsPerSecond)
        self.logger = logger
        reachedOperations.store(log.recordCount, ordering: .relaxed)
        finished = quietOperationsPerSecond > 0 ? DispatchSemaphore(value: 0) : nil
        if finished != nil {
            let thread = Thread { self.run() }
            thread.name = "journal-mover"
            thread.start()
        }
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

    /// Looks the mover's thread has finished; it never changes when the mover has no thread.
    var looks: UInt64 { lookCount.load(ordering: .acquiring) }

    /// Whether a thread moves files while the node serves (the threshold is above 0).
    var movesWhileServing: Bool { finished != nil }

    /// Stops moving, waits for a step under way, and lets go of the log and the directory.
    func close() {
        closed.store(true, ordering: .relaxed)
        if let finished {
            wakeUp.signal()
            finished.wait()
        }
        transfer = nil
        log = nil
        directory = nil
    }

    /// The thread: rests, then looks again, until closed or moving failed.
    private func run() {
        defer { finished?.signal() }
        #if os(Linux)
        if registry_run_when_idle() != 0 {
            logger.notice("the journal mover runs at normal priority: SCHED_IDLE was refused", metadata: ["errno": "\(errno)"])
        }
        #endif
        do {
            try log?.deferDurabilityToCheckpoints()
        } catch {
            logger.error("cannot move journal files while serving; they stay for the next start-up", metadata: ["error": "\(error)"])
            return
        }
        var rest = JournalMovePolicy.idleIntervalNanos
        while !closed.load(ordering: .relaxed) {
            _ = wakeUp.wait(timeout: .now() + .nanoseconds(Int(rest)))
            guard !closed.load(ordering: .relaxed), let next = look() else { break }
            lookCount.wrappingAdd(1, ordering: .releasing)
            rest = next
        }
    }

    /// One look: takes a reading, and when the node is quiet, does one step of moving a finished
    /// file or, with none left, has a missing spare made. Returns how long to rest, or nil once
    /// moving failed.
    private func look() -> UInt64? {
        guard let log, let directory else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        policy.observe(nanos: now, operations: reachedOperations.load(ordering: .relaxed))
        let started = filesStarted.load(ordering: .acquiring)
        let current = started > 0 ? firstFile + started - 1 : firstFile
        guard policy.isQuiet else { return JournalMovePolicy.idleIntervalNanos }
        guard transfer != nil || nextFile < current else {
            spares.topUp()
            return JournalMovePolicy.idleIntervalNanos
        }
        do {
            try step(log: log, directory: directory)
        } catch {
            logger.error(
                "cannot move a finished journal file into the SQLite log while serving; it stays for the next start-up",
                metadata: ["file": "\(nextFile)", "error": "\(error)"])
            return nil
        }
        return policy.pause(afterStepOf: DispatchTime.now().uptimeNanoseconds - now)
    }

    /// One step of the next finished file's transfer: a piece read, or a transaction and the
    /// checkpoint after it; once all of it is in the log, the file is retired.
    private func step(log: OperationLog, directory: DataDirectory) throws(StorageError) {
        let transfer: JournalFileTransfer
        if let current = self.transfer {
            transfer = current
        } else {
            transfer = try JournalFileTransfer(directory: directory, number: nextFile)
            self.transfer = transfer
        }
        let step = try transfer.step(
            into: log, segments: JournalMovePolicy.segmentsPerTransaction, readBytes: JournalMovePolicy.readBytesPerStep)
        if case .moved = step { try log.checkpoint() }
        guard transfer.isFinished else { return }
        try CommitJournal.retire(in: directory, below: transfer.number + 1, spares: spares.admission)
        self.transfer = nil
        nextFile = transfer.number + 1
        movedBytes.wrappingAdd(transfer.bytes, ordering: .relaxed)
        movedFiles.wrappingAdd(1, ordering: .relaxed)
        logger.debug(
            "moved a finished journal file into the SQLite log",
            metadata: ["file": "\(transfer.number)", "operations": "\(transfer.operationsMoved)"])
    }
}
