import Platform
import Dispatch
import Logging
import Metrics
import RegistryCore
import RegistryStorage
import RegistryVersion
import RegistryWire
import NIOConcurrencyHelpers

/// Carries out what ``NodeState`` decides: requests are answered under one lock (fast, in
/// memory), and their operations are group-committed to the durable log by ``LogWriter``.
/// A response is released only after every operation it reports, and every operation applied
/// before it, is durable: while a commit runs, even read-only answers wait for it.
public final class RegistryEngine: Sendable {
    /// Calls back with the answers to one submitted group of requests, in request order.
    public typealias Delivery = @Sendable (Answers) -> Void

    /// Answers decided and, where they changed state, durable: ready to send. They are put in
    /// wire form (UUID text and all) by ``frames``, which the receiver calls on its own thread,
    /// so neither the engine's lock nor the log writer pays for it.
    public struct Answers: Sendable {
        let requestIDs: [UInt64]
        let decisions: [NodeState.Decision]

        public var count: Int { requestIDs.count }

        public var frames: [ServerFrame] {
            zip(requestIDs, decisions).map { ServerFrame(requestID: $0, body: $1.body) }
        }
    }

    /// Answers decided under the lock, waiting for their operations to become durable.
    struct Waiter {
        let answers: Answers
        let deliver: Delivery
    }

    struct Core {
        var node: NodeState
        var generator = BufferedRandom()
        /// What is not durable yet, who waits for it, and whether a commit pass runs.
        var commits = CommitStateMachine<Waiter>()
        var durableOperations: UInt64
        var commitCount: UInt64 = 0
        /// How long each commit's journal write and sync took.
        var commitLatency = LatencyBuckets()
        /// The journal this run has written, as of the last commit (moved files included).
        var journalBytes: UInt64 = 0
        var journalFiles: UInt64 = 0
    }

    public let nodeID: NodeID
    public let clusterID: String
    public let limits: Limits
    /// When the writer waits for more operations before a commit.
    private let pacing: CommitPacing
    /// The vendor rules, for the ``BundleResolver`` each connection keeps.
    public let vendorRules: VendorRules
    public static let serverVersion = "registryd \(BuildVersion.description)"

    /// A pthread mutex: Synchronization.Mutex is a priority-inheritance futex on Linux, whose
    /// contended path costs a kernel round trip every time.
    private let core: NIOLockedValueBox<Core>
    private let writer: LogWriter
    /// Moves finished journal files into the SQLite log while the node is quiet (internal for tests).
    let mover: JournalMover
    /// The spare journal files' maker, asked how many the directory holds for the stats.
    private let spares: SpareJournalMaker
    let counters = ServerCounters()
    /// swift-metrics' view of ``Core/commitLatency``.
    private let commitLatencyMetric = Metrics.Timer(label: "registry_commit_duration")
    private let logger: Logger
    private let wallClock: @Sendable () -> UInt64
    private let startedAt: UInt64
    /// Called once, off the lock, when the log fails; registryd shuts down on it.
    private let onFatalError: @Sendable (StorageError) -> Void

    /// Opens the data directory, replays the log into memory, and restores the clock and sequence.
    public init(
        configuration: NodeConfiguration, logger: Logger, wallClock: @escaping @Sendable () -> UInt64 = wallClockMillis,
        onFatalError: @escaping @Sendable (StorageError) -> Void = { _ in }
    ) throws(NodeStartupError) {
        let log: OperationLog
        let directory: DataDirectory
        let identity: NodeIdentity
        let journalFile: UInt64
        // One admission for the start-up's retiring and the spare maker's, so spares never exceed the number kept.
        let spareAdmission = SpareAdmission(keeping: configuration.journalSpares)
        do {
            directory = try DataDirectory(path: configuration.dataDirectory)
            log = try OperationLog(directory: directory)
            journalFile = try Self.recoverJournal(
                directory: directory, into: log, spares: spareAdmission, logger: logger)
            if let stored = try log.identity() {
                if let configured = configuration.nodeID, configured.value != stored.nodeID {
                    throw NodeStartupError.nodeIDMismatch(stored: stored.nodeID, configured: configured.value)
                }
                identity = stored
            } else {
                var generator = SystemRandomNumberGenerator()
                let nodeID = configuration.nodeID?.value ?? "node-\(String(generator.next() & 0xFFFF_FFFF, radix: 16))"
                identity = NodeIdentity(nodeID: nodeID, epoch: wallClock())
                try log.initialise(identity)
                logger.info("initialised a new data directory", metadata: ["node": "\(nodeID)", "epoch": "\(identity.epoch)"])
            }
        } catch let error as NodeStartupError {
            throw error
        } catch let error as StorageError {
            throw .storage(error)
        } catch {
            throw .storage(.corrupt("\(error)"))
        }

        let replayed: LogReplay.Outcome
        do {
            replayed = try LogReplay.run(log, identity: identity, expectedDevices: configuration.expectedDevices)
        } catch {
            throw .storage(error)
        }
        let registry = replayed.registry
        // Read before the log passes to the mover's thread, which owns it from then on.
        let operations = log.recordCount

        let nodeID = NodeID(trusted: identity.nodeID)
        let node = NodeState(
            registry: registry, clock: HybridLogicalClock(last: replayed.newest), nodeID: nodeID, epoch: identity.epoch,
            nextSequence: replayed.lastOwnSequence + 1, versionVector: replayed.versionVector, rules: configuration.vendorRules,
            limits: configuration.limits)
        self.core = NIOLockedValueBox(Core(node: node, durableOperations: operations))
        let spares = SpareJournalMaker(
            directoryPath: directory.path, bytes: configuration.journalFileBytes, firstFile: journalFile,
            admission: spareAdmission,
            onNoRoom: { [logger, minimum = SpareJournalMaker.freeFilesNeeded * configuration.journalFileBytes] in
                logger.notice(
                    "no spare journal file made: the file system has less free space than a spare needs",
                    metadata: ["needed_bytes": "\(minimum)"])
            })
        do {
            self.writer = try LogWriter(
                directory: directory, journalFile: journalFile, durableRecords: operations,
                fileBytes: configuration.journalFileBytes, spares: spares)
        } catch {
            throw .storage(error)
        }
        self.mover = JournalMover(
            log: log, directory: directory, firstFile: journalFile,
            quietOperationsPerSecond: configuration.moveJournalBelowOperationsPerSecond, spares: spares, logger: logger)
        self.spares = spares
        self.nodeID = nodeID
        self.clusterID = configuration.clusterID
        self.limits = configuration.limits
        self.pacing = configuration.commitPacing
        self.vendorRules = configuration.vendorRules
        self.logger = logger
        self.wallClock = wallClock
        self.startedAt = wallClock()
        self.onFatalError = onFatalError
        logger.info(
            "replayed the operation log",
            metadata: [
                "operations": "\(operations)", "devices": "\(registry.deviceCount)", "claims": "\(registry.claimCount)",
                "epoch": "\(identity.epoch)", "next_sequence": "\(replayed.lastOwnSequence + 1)",
            ])
    }

    /// Moves the commits journaled by the previous run into `log` (they were acknowledged), one
    /// journal file at a time, then retires the files (keeping as spares what `spares` admits)
    /// and returns the number for the next one.
    /// Throws ``NodeStartupError/journalNotMoved(operations:commits:reason:)`` when the log
    /// cannot take a file's commits, and the ``StorageError`` of reading or retiring the files.
    /// Moving is idempotent (the log skips records it holds), so a start-up cut short by a crash
    /// simply moves again.
    private static func recoverJournal(
        directory: DataDirectory, into log: OperationLog, spares: SpareAdmission, logger: Logger
    ) throws -> UInt64 {
        let started = DispatchTime.now().uptimeNanoseconds
        var operations = 0
        var notMoved: NodeStartupError?
        let recovered: CommitJournal.Recovered
        do {
            recovered = try CommitJournal.recover(in: directory) { (_, entries) throws(StorageError) in
                let merged = JournalEntry.merging(entries)
                let count = merged.segments.reduce(0) { $0 + $1.count }
                do throws(StorageError) {
                    try log.append(merged.segments, clock: merged.clock)
                } catch {
                    notMoved = .journalNotMoved(operations: count, commits: entries.count, reason: error)
                    throw error
                }
                operations += count
            }
        } catch {
            throw notMoved ?? error
        }
        if let tail = recovered.tornTail {
            logger.warning(
                "discarded the unfinished last entry of the commit journal; it was never acknowledged",
                metadata: ["where": "\(tail)"])
        }
        let next = (recovered.files.last ?? 0) + 1
        try CommitJournal.retire(in: directory, below: next, spares: spares)
        if !recovered.files.isEmpty {
            logger.info(
                "recovered the commit journal",
                metadata: [
                    "files": "\(recovered.files.count)", "entries": "\(recovered.entries)", "operations": "\(operations)",
                    "seconds": "\(Double((DispatchTime.now().uptimeNanoseconds - started) / 1_000_000) / 1_000)",
                ])
        }
        return next
    }

    /// Answers `frames` in order and calls `deliver` with the responses once they may be sent:
    /// at once when nothing is waiting to become durable, otherwise from the writer's queue.
    public func submit(_ frames: [ClientFrame], deliver: @escaping Delivery) {
        var resolver = BundleResolver(rules: vendorRules, capacity: 0)
        submit(frames, resolver: &resolver, deliver: deliver)
    }

    /// As ``submit(_:deliver:)``, validating bundles through the caller's `resolver`.
    ///
    /// Validation runs before the lock, and the lock is taken once per frame rather than once
    /// for the group, so that other connections and the log writer interleave with a long
    /// group. Ordering stays safe: a group that changed or observed anything not yet durable
    /// (pending, or in a running commit) is answered only after a later commit pass, and it
    /// starts that commit itself when none is running.
    public func submit(_ frames: [ClientFrame], resolver: inout BundleResolver, deliver: @escaping Delivery) {
        let prepared = frames.map { NodeState.prepare($0.body, resolver: &resolver, limits: limits) }
        let requestIDs = frames.map(\.requestID)
        let wall = wallClock()
        var decisions = [NodeState.Decision]()
        decisions.reserveCapacity(frames.count)
        var mustWait = false
        for (frame, request) in zip(frames, prepared) {
            // Counting the spares lists the data directory: done before the lock, not under it.
            var spareCount = 0
            if case .stats = frame.body { spareCount = spares.spareCount }
            let (decision, waits) = core.withLockedValue { core -> (NodeState.Decision, Bool) in
                if let failure = core.commits.failure { return (.answer(.error(failure)), false) }
                // Anything pending or being committed is not durable yet: whoever saw it waits.
                let undurable = core.commits.holdsUndurable
                if case .stats = frame.body { return (.answer(.stats(stats(core, journalSpares: spareCount))), undurable) }
                let before = core.commits.pendingOperations.count
                let decision = core.commits.recordOperations { operations in
                    core.node.decide(
                        request, requestID: frame.requestID, wallMillis: wall, generator: &core.generator, operations: &operations)
                }
                return (decision, undurable || core.commits.pendingOperations.count > before)
            }
            decisions.append(decision)
            mustWait = mustWait || waits
        }
        let waiter = Waiter(answers: Answers(requestIDs: requestIDs, decisions: decisions), deliver: deliver)
        guard mustWait else { return deliverCounted(waiter) }
        switch core.withLockedValue({ $0.commits.answered(waiter, waits: true) }) {
        case .deliver: deliverCounted(waiter)
        case .wait: break
        case .waitAndStartPass: writer.queue.async { self.commitLoop() }
        }
    }

    private func deliverCounted(_ waiter: Waiter) {
        counters.record(waiter.answers.decisions)
        waiter.deliver(waiter.answers)
    }

    /// Runs on the writer's queue until nothing is pending: each pass takes everything queued
    /// so far and makes it durable with one journal entry (group commit). A pass that follows
    /// another may first wait for more operations to join it (see ``CommitPacing``).
    private func commitLoop() {
        var followsAnotherPass = false
        while true {
            if pacing.delayMicros > 0 {
                let pending = core.withLockedValue { $0.commits.pendingOperations.count }
                let delay = pacing.delay(pendingOperations: pending, followsAnotherPass: followsAnotherPass)
                if delay > 0 { usleep(delay) }
            }
            followsAnotherPass = true
            // The clock is read with the operations, so that it covers every one of them.
            let (pass, clock) = core.withLockedValue { ($0.commits.nextPass(), $0.node.clock.last) }
            let operations: [LoggedOperation]
            let waiters: [Waiter]
            switch pass {
            case .finish:
                return
            case .refuse(let refused, let failure):
                refuse(refused, with: failure)
                continue
            case .deliver(let ready):
                // Read-only answers that waited for the previous pass, which is now durable.
                for waiter in ready { deliverCounted(waiter) }
                continue
            case .write(let taken, let waiting):
                (operations, waiters) = (taken, waiting)
            }
            switch writer.write(operations, clock: clock) {
            case .success(let committed):
                core.withLockedValue { core in
                    core.durableOperations = committed.durable
                    core.commitCount += 1
                    core.commitLatency.record(micros: committed.syncMicros)
                    core.journalBytes = committed.journalBytes
                    core.journalFiles = committed.journalFiles
                }
                mover.noteCommit(durableOperations: committed.durable, journalFiles: committed.journalFiles)
                commitLatencyMetric.recordMicroseconds(committed.syncMicros)
                for waiter in waiters { deliverCounted(waiter) }
            case .failure(let error):
                logger.critical("the operation log failed; refusing all requests", metadata: ["error": "\(error)"])
                let failure = WireError(code: .unavailable, message: "node storage failed: \(error)", retryable: true)
                core.withLockedValue { $0.commits.failed(failure) }
                refuse(waiters, with: failure)
                onFatalError(error)
            }
        }
    }

    private func refuse(_ waiters: [Waiter], with failure: WireError) {
        for waiter in waiters {
            let refused = waiter.answers.requestIDs.map { _ in NodeState.Decision.answer(.error(failure)) }
            deliverCounted(Waiter(answers: Answers(requestIDs: waiter.answers.requestIDs, decisions: refused), deliver: waiter.deliver))
        }
    }

    /// The node's statistics.
    public func stats() -> StatsMessage {
        let spareCount = spares.spareCount
        return core.withLockedValue { stats($0, journalSpares: spareCount) }
    }

    /// The stats as of `core`, with `journalSpares` spare journal files counted (before the lock).
    private func stats(_ core: borrowing Core, journalSpares: Int) -> StatsMessage {
        var message = StatsMessage()
        message.nodeID = nodeID.value
        message.clusterID = clusterID
        message.serverVersion = Self.serverVersion
        message.uptimeMillis = wallClock() &- startedAt
        message.deviceCount = UInt64(core.node.registry.deviceCount)
        message.aliasCount = UInt64(core.node.registry.aliasCount)
        message.claimCount = UInt64(core.node.registry.claimCount)
        message.requestsServed = counters.requestsServed
        message.errors = counters.errorCounts
        message.logOperations = core.durableOperations
        message.logEpoch = core.node.epoch
        message.logSequence = core.node.nextSequence - 1
        message.connections = UInt64(counters.connections)
        message.logCommits = core.commitCount
        message.commitLatency = core.commitLatency
        // What the journal holds that the log does not yet: this run's files less those moved.
        let moved = mover.moved
        message.journalBytes = core.journalBytes > moved.bytes ? core.journalBytes - moved.bytes : 0
        message.journalFiles = core.journalFiles > moved.files ? core.journalFiles - moved.files : 0
        message.journalSpares = UInt64(journalSpares)
        message.journalSparesKept = UInt64(spares.keeping)
        message.versionVector = core.node.versionVector.logs.map {
            LogPosition(origin: $0.log.origin.value, epoch: $0.log.epoch, sequence: $0.sequence)
        }
        return message
    }

    /// Refuses new requests, waits for queued commits, and closes storage (releasing the lock).
    public func close() {
        core.withLockedValue { $0.commits.close(with: WireError(code: .unavailable, message: "the node is shutting down", retryable: true)) }
        writer.close()
        mover.close()
        logger.info("storage closed")
    }
}

/// Milliseconds since the Unix epoch from the system clock.
@Sendable public func wallClockMillis() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
}
