import Dispatch
import Logging
import Metrics
import Platform
import RegistryCore
import RegistryStorage
import RegistryWire
import Synchronization

/// The one owner of the writer's queue and of what happens there: group commits (what
/// ``CommitStateMachine`` says is pending goes to the ``LogWriter`` as one journal entry, or several
/// past 256 MiB, and into
/// ``DurableState``), each completion sent once what it saw is durable, and whatever must run
/// between two commits, where the journal and the durable state agree: a snapshot's start, and a
/// peer's snapshot's install (``betweenCommits(_:)``).
final class CommitPipeline: Sendable {
    private let core: SharedCore
    let writer: LogWriter
    /// Takes the snapshots this pipeline starts.
    let snapshots: Snapshotter
    /// When the writer waits for more operations before a commit.
    private let pacing: CommitPacing
    /// The operations most recently made durable, for the peer links.
    private let recent: RecentOperations
    private let counters: ServerCounters
    private let replicas: ReplicaWaits
    /// Where each commit's events go once durable, for the watchers.
    let watchHub: WatchHub
    /// Called after every commit (see ``observeCommits(_:)``).
    private let durableObservers = Mutex<[@Sendable () -> Void]>([])
    /// Work waiting to run between two commits (``runBetweenCommits(_:)``).
    private let interjections = Mutex<[@Sendable () -> Void]>([])
    /// Set while ``interjections`` may hold work: the commit loop reads it once per pass.
    private let interjectionsWaiting = Atomic<Bool>(false)
    /// swift-metrics' view of ``DurableState/commitLatency``.
    private let commitLatencyMetric = Metrics.Timer(label: MetricCatalog.commitDuration.name)
    /// Operations per group commit.
    private let commitOperationsMetric = Recorder(label: MetricCatalog.commitOperations.name)
    private let logger: Logger
    /// Called once, off the lock, when the log fails; registryd shuts down on it.
    private let onFatalError: @Sendable (StorageError) -> Void

    init(
        core: SharedCore, writer: LogWriter, snapshots: Snapshotter, pacing: CommitPacing, recent: RecentOperations,
        counters: ServerCounters, replicas: ReplicaWaits, watchHub: WatchHub, logger: Logger,
        onFatalError: @escaping @Sendable (StorageError) -> Void
    ) {
        self.watchHub = watchHub
        self.core = core
        self.writer = writer
        self.snapshots = snapshots
        self.pacing = pacing
        self.recent = recent
        self.counters = counters
        self.replicas = replicas
        self.logger = logger
        self.onFatalError = onFatalError
    }

    /// Completes `completion` now when it `waits` for nothing, otherwise after the commit pass
    /// that makes what it saw durable, starting one when none runs.
    func enqueue(_ completion: RegistryEngine.Completion, waits: Bool) {
        guard waits else { return complete(completion) }
        switch core.withLockedValue({ $0.commits.answered(completion, waits: true) }) {
        case .deliver: complete(completion)
        case .wait: break
        case .waitAndStartPass: writer.queue.async { self.commitLoop() }
        }
    }

    /// What it saw is durable: a client's answers go (after their replicas, when they asked for
    /// some) and count as requests; a peer hears what this node holds; the node's own change is done.
    private func complete(_ completion: RegistryEngine.Completion) {
        switch completion {
        case .client(let waiter): deliverCounted(waiter)
        case .peerBatch(let result, let deliver): deliver(result)
        case .own(let done): done()
        }
    }

    /// Sends a client's answers (after their replicas, when they asked for some), counted.
    func deliverCounted(_ waiter: RegistryEngine.Waiter) {
        if waiter.replicas > 0 { return replicas.hold(waiter) }
        counters.record(waiter.answers.decisions, submittedNanos: waiter.submittedNanos)
        waiter.deliver(waiter.answers)
    }

    /// Runs on the writer's queue until nothing is pending: each pass takes everything queued
    /// so far and makes it durable with one journal entry (group commit; several past 256 MiB). A pass that follows
    /// another may first wait for more operations to join it (see ``CommitPacing``).
    private func commitLoop() {
        var followsAnotherPass = false
        while true {
            // Work waiting between commits runs between two passes, not once the writes stop:
            // under steady writes the loop may not end for as long as they last.
            if followsAnotherPass, interjectionsWaiting.load(ordering: .acquiring) { runInterjections() }
            if pacing.delayMicros > 0 {
                let pending = core.withLockedValue { $0.commits.pendingOperations.count }
                let delay = pacing.delay(pendingOperations: pending, followsAnotherPass: followsAnotherPass)
                if delay > 0 { usleep(delay) }
            }
            followsAnotherPass = true
            // The clock is read with the operations, so that it covers every one of them.
            let (pass, clock) = core.withLockedValue { ($0.commits.nextPass(), $0.node.clock.last) }
            let operations: [LoggedOperation]
            let waiters: [RegistryEngine.Completion]
            switch pass {
            case .finish:
                return
            case .refuse(let refused, let failure):
                refuse(refused, with: failure)
                continue
            case .deliver(let ready):
                // Read-only answers that waited for the previous pass, which is now durable.
                for completion in ready { complete(completion) }
                continue
            case .write(let taken, let waiting):
                (operations, waiters) = (taken, waiting)
            }
            switch writer.write(operations, clock: clock, keepingRecords: recent.isKeeping) {
            case .success(let written):
                let syncMicros = written.syncMicros
                recent.append(runs: written.runs)
                let (snapshotThrough, events, durable) = core.withLockedValue { core in
                    core.durable.committed(operations, syncMicros: syncMicros)
                    let due = core.snapshotPolicy.shouldStart(
                        durableOperations: core.durable.operations, nowNanos: SystemClock.monotonicNanos())
                    return (due ? core.durable.vector.sequences : nil, core.node.feedStaging.take(heldBy: core.durable.vector), core.durable.vector)
                }
                // In commit order: this queue is the only publisher.
                watchHub.publish(events, through: durable)
                if let snapshotThrough { startSnapshot(through: snapshotThrough, clock: clock, completion: nil) }
                commitLatencyMetric.recordMicroseconds(syncMicros)
                commitOperationsMetric.record(operations.count)
                for completion in waiters { complete(completion) }
                notifyDurable()
                // Emptied here, outside the lock, and handed back for a later pass to fill.
                var emptied = consume operations
                emptied.removeAll(keepingCapacity: true)
                core.withLockedValue { [emptied] in $0.commits.recycle(emptied) }
            case .failure(let error):
                logger.critical("the operation log failed; refusing all requests", metadata: ["error": "\(error)"])
                let failure = WireError(code: .unavailable, message: "node storage failed: \(error)", retryable: true)
                core.withLockedValue { $0.commits.failed(failure) }
                refuse(waiters, with: failure)
                onFatalError(error)
            }
        }
    }

    /// Something already made every request refused (``CommitStateMachine/failed(_:)``, set by
    /// the caller under the lock): the node stops, as when the log fails.
    func stopAfterFailure(_ error: StorageError) {
        onFatalError(error)
    }

    /// The log failed before what `completions` saw was durable: clients get `failure` (counted),
    /// peers hear their batch refused, and the node's own changes are done with.
    private func refuse(_ completions: [RegistryEngine.Completion], with failure: WireError) {
        for completion in completions {
            switch completion {
            case .client(let waiter):
                let refused = waiter.answers.requestIDs.map { _ in NodeState.Decision.answer(.error(failure)) }
                counters.record(refused, submittedNanos: waiter.submittedNanos)
                waiter.deliver(RegistryEngine.Answers(requestIDs: waiter.answers.requestIDs, decisions: refused))
            case .peerBatch(_, let deliver): deliver(.failure(failure))
            case .own(let done): done()
            }
        }
    }

    /// Calls `observer` after every commit (off the engine's lock, on the writer's queue): the
    /// replication links send what became durable. It must return quickly.
    func observeCommits(_ observer: @escaping @Sendable () -> Void) {
        durableObservers.withLock { $0.append(observer) }
    }

    /// Tells the observers (``observeCommits(_:)``) that more is durable.
    func notifyDurable() {
        for observer in durableObservers.withLock({ $0 }) { observer() }
    }

    /// Runs `body` on the writer's queue, no commit running meanwhile, and returns what it returns
    /// (``runBetweenCommits(_:)``); the caller's thread waits. Not from the writer's queue.
    func betweenCommits<Result: Sendable>(_ body: @escaping @Sendable () -> Result) -> Result {
        dispatchPrecondition(condition: .notOnQueue(writer.queue))
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result?>(nil)
        runBetweenCommits {
            outcome.withLock { $0 = body() }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0! }
    }

    /// Runs `job` on the writer's queue where the journal and the durable state agree: after the
    /// commit pass under way, if any, and before the next. Operations taken after that pass
    /// began may not be durable yet. A commit loop runs it between two of its passes; with none
    /// running, its own block on the queue does.
    func runBetweenCommits(_ job: @escaping @Sendable () -> Void) {
        interjections.withLock { $0.append(job) }
        interjectionsWaiting.store(true, ordering: .releasing)
        writer.queue.async { self.runInterjections() }
    }

    /// Runs the work waiting between commits, in the order it came; on the writer's queue.
    private func runInterjections() {
        dispatchPrecondition(condition: .onQueue(writer.queue))
        guard interjectionsWaiting.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let jobs = interjections.withLock { jobs in
            defer { jobs.removeAll() }
            return jobs
        }
        for job in jobs { job() }
    }

    // MARK: - Snapshots start between two commits

    /// Starts a snapshot through `through`, what is durable now; runs on the writer's queue, so
    /// that nothing commits meanwhile, and the snapshot itself runs on its own thread.
    /// `completion` gets its outcome, or nil when one was being taken already.
    /// With `erasing`, the snapshot is an erasure snapshot (``ErasureSchedule``): kept alone.
    private func startSnapshot(
        through: [LogID: UInt64], clock: HLCTimestamp, erasing: Bool = false,
        completion: (@Sendable (Result<Snapshotter.Taken, StorageError>?) -> Void)?
    ) {
        dispatchPrecondition(condition: .onQueue(writer.queue))
        let keeping = erasing ? 1 : Snapshotter.keeping
        let devices = core.withLockedValue { $0.node.registry.slotCount }
        let core = self.core
        let snapshots = self.snapshots
        snapshots.start(
            through: through, clock: clock, currentFile: writer.currentFile, devices: devices, keeping: keeping,
            fork: {
                core.withLockedValue { core in
                    snapshots.fork(&core.node.registry, vector: core.node.versionVector, clock: core.node.clock.last)
                }
            },
            isDurable: { vector in core.withLockedValue { $0.durable.vector.covers(vector) } }
        ) { outcome in
            let covered: UInt64?
            if case .success(let taken) = outcome { covered = taken.operations } else { covered = nil }
            // Nil (another snapshot was running, one taken in the foreground) ends this one too:
            // the policy would otherwise say one is being taken for good, and start none again.
            self.core.withLockedValue { core in
                core.snapshotPolicy.finished(covering: covered, nowNanos: SystemClock.monotonicNanos())
                if erasing && covered != nil { core.erasure.erasureSnapshotTaken(covering: through) }
            }
            completion?(outcome)
        }
    }

    // MARK: - Erasure on time

    /// Set when the pipeline closes: the erasure checks stop.
    private let erasureStopped = Atomic<Bool>(false)

    /// Checks ``ErasureSchedule`` at its interval, on the writer's queue, until the pipeline
    /// closes: when a snapshot is due for forgotten devices' bytes, the journal goes on in a new
    /// file (so that the file holding their operations can be trimmed) and a snapshot starts,
    /// however little is being written. Does nothing when `--erasure-within` is 0.
    func startErasureChecks() {
        let interval = core.withLockedValue { $0.erasure.withinNanos > 0 ? $0.erasure.checkIntervalNanos : 0 }
        guard interval > 0 else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(interval))) { [self] in
            guard !erasureStopped.load(ordering: .relaxed) else { return }
            runBetweenCommits { [self] in
                guard !erasureStopped.load(ordering: .relaxed) else { return }
                checkErasure()
                startErasureChecks()
            }
        }
    }

    private func checkErasure() {
        let now = SystemClock.monotonicNanos()
        let start = core.withLockedValue { core -> (through: [LogID: UInt64], clock: HLCTimestamp)? in
            if core.node.registry.erasures != core.erasure.erasuresSeen {
                core.erasure.observe(erasures: core.node.registry.erasures, held: core.node.versionVector.sequences, nowNanos: now)
            }
            let durable = core.durable.vector.sequences
            guard core.erasure.isDue(nowNanos: now, durable: durable), core.snapshotPolicy.startByRequest() else { return nil }
            return (durable, core.node.clock.last)
        }
        guard let start else { return }
        do {
            try writer.rotateNow()
        } catch {
            // A journal that failed takes no more writes (``CommitJournal``): the next commit fails
            // and the node refuses requests from then on.
            logger.critical("could not start a new journal file for erasure; the journal is stopped", metadata: ["error": "\(error)"])
        }
        logger.info("snapshot for erasure (--erasure-within)")
        startSnapshot(through: start.through, clock: start.clock, erasing: true, completion: nil)
    }

    /// Takes a snapshot through what is durable now, on the caller's thread and priority, commits
    /// waiting meanwhile (a stopping node; the simulation, whose steps must not depend on a
    /// background thread's scheduling).
    func snapshotInForeground() -> Result<Snapshotter.Taken, StorageError> {
        writer.queue.sync {
            // The serving state itself when everything it holds is durable (a clean stop, as a
            // rule): a copy that shares its tables, which nothing changes while commits wait.
            let (clock, through, devices, durable) = core.withLockedValue { core in
                (
                    core.node.clock.last, core.durable.vector.sequences, core.node.registry.slotCount,
                    core.durable.vector.covers(core.node.versionVector) ? core.node.registry : nil
                )
            }
            let outcome = snapshots.takeNow(through: through, clock: clock, currentFile: writer.currentFile, devices: devices, durable: durable)
            if case .success(let taken) = outcome {
                core.withLockedValue { $0.snapshotPolicy.covers(taken.operations, nowNanos: SystemClock.monotonicNanos()) }
            }
            return outcome
        }
    }

    /// Takes a snapshot now (`registryctl snapshot`); `completion` gets its outcome, or nil when
    /// one was being taken already.
    func snapshotNow(completion: @escaping @Sendable (Result<Snapshotter.Taken, StorageError>?) -> Void) {
        guard core.withLockedValue({ $0.snapshotPolicy.startByRequest() }) else { return completion(nil) }
        runBetweenCommits {
            let (clock, through) = self.core.withLockedValue { ($0.node.clock.last, $0.durable.vector.sequences) }
            self.startSnapshot(through: through, clock: clock, completion: completion)
        }
    }

    /// Refuses new requests with `reason`, waits for queued commits, closes the journal, and, when
    /// it holds operations no snapshot covers, takes one so that the next start-up replays little.
    func close(refusing reason: WireError) {
        erasureStopped.store(true, ordering: .relaxed)
        core.withLockedValue { $0.commits.close(with: reason) }
        writer.close()
        let (durable, covered) = core.withLockedValue { ($0.durable.operations, $0.snapshotPolicy.coveredOperations) }
        if durable > covered { _ = snapshotInForeground() }
    }
}
