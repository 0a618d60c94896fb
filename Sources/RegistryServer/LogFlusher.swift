import Dispatch
import NIOConcurrencyHelpers
import RegistryStorage

/// Moves journaled group commits into the SQLite ``OperationLog`` off the commit path, many at a
/// time, then retires the ``CommitJournal`` files they came from (one is kept for reuse). A
/// commit is durable (and acknowledged) once its journal entry is synced; this only decides where
/// it lives from then on.
///
/// `@unchecked Sendable`: `log`, `directory` and `retiredBelow` are touched only by closures on
/// the serial `queue` (`close` runs on it through `queue.sync`); everything else shared is in
/// `state`, behind a lock, or immutable.
final class LogFlusher: @unchecked Sendable {
    private let queue = DispatchQueue(label: "registry.log-flusher")
    private var log: OperationLog?
    /// Released with the log at close: together they hold the data directory's lock.
    private var directory: DataDirectory?
    /// Journal files below this number are retired (0 until the first flush retires any).
    private var retiredBelow: UInt64 = 0
    private let delay: DispatchTimeInterval
    private let flushBytes: Int
    private let maxPendingBytes: Int
    private let state = NIOLockedValueBox(State())

    private struct State {
        /// Entries synced to the journal and not yet in the log, oldest first, with the number
        /// of the journal file each is in.
        var pending: [(entry: JournalEntry, file: UInt64)] = []
        var pendingBytes = 0
        /// A flush is queued for after the delay.
        var flushScheduled = false
        /// A flush is queued to run at once (``flushBytes`` reached).
        var urgentScheduled = false
        /// Set when moving entries into the log failed; every later hand-over reports it.
        var failure: StorageError?
    }

    /// - Parameters:
    ///   - delay: how long a flush waits to collect more commits after the first one. Each
    ///     flush syncs SQLite's WAL, and a journal `fdatasync` issued meanwhile queues behind
    ///     that write on the disk. Small, frequent flushes keep the queue short: on this
    ///     project's VM, a 20 KB append's `fdatasync` beside a second stream synced every 0.5 s
    ///     had p99 3.3 ms, and every 10 ms, 0.66 ms (see `NodeConfiguration.journalFlushMillis`).
    ///   - flushBytes: from this many pending bytes a flush starts at once, without waiting
    ///     for the delay, so one flush (and one sync) stays around a megabyte.
    ///   - maxPendingBytes: past this, ``hand(_:file:)`` flushes before it returns, so a log
    ///     that cannot keep up slows commits down instead of growing memory without bound.
    init(
        log: OperationLog, directory: DataDirectory, delay: DispatchTimeInterval = .milliseconds(50), flushBytes: Int = 1 << 20,
        maxPendingBytes: Int = 64 << 20
    ) {
        self.log = log
        self.directory = directory
        self.delay = delay
        self.flushBytes = flushBytes
        self.maxPendingBytes = maxPendingBytes
    }

    /// Takes an entry already synced to journal file `file`. Throws the error of an earlier
    /// flush: the journal still holds everything, but the log can no longer be trusted to.
    func hand(_ entry: JournalEntry, file: UInt64) throws(StorageError) {
        let bytes = entry.segments.reduce(0) { $0 + $1.bytes.count }
        let (failure, schedule, urgent, overdue) = state.withLockedValue { state -> (StorageError?, Bool, Bool, Bool) in
            if let failure = state.failure { return (failure, false, false, false) }
            state.pending.append((entry, file))
            state.pendingBytes += bytes
            let schedule = !state.flushScheduled
            state.flushScheduled = true
            let urgent = !state.urgentScheduled && state.pendingBytes >= flushBytes
            if urgent { state.urgentScheduled = true }
            return (nil, schedule, urgent, state.pendingBytes > maxPendingBytes)
        }
        if let failure { throw failure }
        if schedule { queue.asyncAfter(deadline: .now() + delay) { self.flush() } }
        if urgent { queue.async { self.flush() } }
        if overdue { queue.sync { flush() } }
    }

    /// Flushes what is pending, then closes the log and retires the journal files below
    /// `journalFile + 1` (all of them) when every entry reached the log.
    func close(journalFile: UInt64) {
        queue.sync {
            flush()
            // The last flush may have left SQLite's WAL unsynced: sync it before the journal goes.
            if let directory, let log, state.withLockedValue({ $0.failure }) == nil, (try? log.makeDurable()) != nil {
                try? CommitJournal.retire(in: directory, below: journalFile + 1)
            }
            log = nil
            directory = nil
        }
    }

    /// Runs on `queue`: one SQLite transaction for every pending entry. It is synced only when
    /// journal files are to be retired after it (the first entry of a newer file is among them):
    /// until then the journal holds every entry durably, so syncing SQLite's WAL on each flush
    /// (every 50 ms) bought nothing but disk flushes queued beside the commits' `fdatasync`s.
    /// Checkpoints still sync as they go.
    private func flush() {
        dispatchPrecondition(condition: .onQueue(queue))
        let taken = state.withLockedValue { state -> [(entry: JournalEntry, file: UInt64)] in
            state.flushScheduled = false
            state.urgentScheduled = false
            guard state.failure == nil else { return [] }
            defer {
                state.pending = []
                state.pendingBytes = 0
            }
            return state.pending
        }
        guard let newestFile = taken.last?.file, let log, let directory else { return }
        let merged = JournalEntry.merging(taken.map(\.entry))
        let retires = newestFile > retiredBelow
        do {
            try log.append(merged.segments, clock: merged.clock, durably: retires)
            if retires {
                // Every entry of an older file was handed over before these, so it is in the log.
                try CommitJournal.retire(in: directory, below: newestFile)
                retiredBelow = newestFile
            }
        } catch {
            state.withLockedValue { $0.failure = error }
        }
    }
}
