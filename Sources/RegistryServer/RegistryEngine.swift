#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Logging
import Metrics
import RegistryCore
import RegistryStorage
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
        /// Changes applied in memory and not durable yet, and the answers waiting for them.
        var queue = CommitQueue<[LogSegment], Waiter>()
        /// True from the moment a commit loop is scheduled until it finds nothing left to take.
        var commitRunning = false
        /// Set once the log failed or was closed; from then on every request is refused.
        var failure: WireError?
        var durableOperations: UInt64
        var commits: UInt64 = 0
        /// How long each commit's journal write and sync took.
        var commitLatency = LatencyBuckets()

        /// Marks a commit loop as running when one should start: none runs, and there is
        /// something to take or, after a failure, waiters to refuse.
        mutating func startCommit() -> Bool {
            guard !commitRunning, queue.canTake || failure != nil else { return false }
            commitRunning = true
            return true
        }
    }

    public let nodeID: NodeID
    public let clusterID: String
    public let limits: Limits
    /// When the writer waits for more operations before a commit.
    private let pacing: CommitPacing
    /// The vendor rules, for the ``BundleResolver`` each connection keeps.
    public let vendorRules: VendorRules
    public static let serverVersion = "registryd 0.1.0"

    /// A pthread mutex: Synchronization.Mutex is a priority-inheritance futex on Linux, whose
    /// contended path costs a kernel round trip every time.
    private let core: NIOLockedValueBox<Core>
    private let writer: LogWriter
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
        do {
            directory = try DataDirectory(path: configuration.dataDirectory)
            log = try OperationLog(directory: directory)
            journalFile = try Self.recoverJournal(directory: directory, into: log, logger: logger)
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

        let nodeID = NodeID(trusted: identity.nodeID)
        let node = NodeState(
            registry: registry, clock: HybridLogicalClock(last: replayed.newest), nodeID: nodeID, epoch: identity.epoch,
            nextSequence: replayed.lastOwnSequence + 1, rules: configuration.vendorRules, limits: configuration.limits)
        self.core = NIOLockedValueBox(Core(node: node, durableOperations: log.recordCount))
        do {
            self.writer = try LogWriter(log: log, directory: directory, journalFile: journalFile)
        } catch {
            throw .storage(error)
        }
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
                "operations": "\(log.recordCount)", "devices": "\(registry.deviceCount)", "claims": "\(registry.claimCount)",
                "epoch": "\(identity.epoch)", "next_sequence": "\(replayed.lastOwnSequence + 1)",
            ])
    }

    /// Moves the commits journaled by the previous run into `log` (they were acknowledged), one
    /// journal file at a time, then retires the files and returns the number for the next one.
    /// Throws ``NodeStartupError/journalNotMoved(operations:commits:reason:)`` when the log
    /// cannot take a file's commits, and the ``StorageError`` of reading or retiring the files.
    /// Moving is idempotent (the log skips records it holds), so a start-up cut short by a crash
    /// simply moves again.
    private static func recoverJournal(directory: DataDirectory, into log: OperationLog, logger: Logger) throws -> UInt64 {
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
        try CommitJournal.retire(in: directory, below: next)
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
        submit(frames, resolver: &resolver, encoder: OperationEncoder(), deliver: deliver)
    }

    /// As ``submit(_:deliver:)``, validating bundles through the caller's `resolver` and
    /// encoding operations for the journal with the caller's `encoder`.
    ///
    /// Validation runs before the lock, and the lock is taken once per frame rather than once
    /// for the group, so that other connections and the log writer interleave with a long
    /// group. A frame that changes the state reserves its place in the ``CommitQueue`` under
    /// the lock and encodes its operations after it, so encoding runs on the callers' threads,
    /// side by side, rather than on the writer's. A group that changed or observed anything not
    /// yet durable is answered once all of that is durable, and it starts a commit pass itself
    /// when none is running.
    public func submit(
        _ frames: [ClientFrame], resolver: inout BundleResolver, encoder: OperationEncoder, deliver: @escaping Delivery
    ) {
        let prepared = frames.map { NodeState.prepare($0.body, resolver: &resolver, limits: limits) }
        let requestIDs = frames.map(\.requestID)
        let wall = wallClock()
        var decisions = [NodeState.Decision]()
        decisions.reserveCapacity(frames.count)
        var operations = [LoggedOperation]()
        // The last ticket any of these answers may have seen, and whether it is durable yet.
        var through: UInt64 = 0
        var mustWait = false
        for (frame, request) in zip(frames, prepared) {
            let (decision, ticket, seen, undurable) = core.withLockedValue {
                core -> (NodeState.Decision, UInt64?, UInt64, Bool) in
                if let failure = core.failure { return (.answer(.error(failure)), nil, 0, false) }
                let decision: NodeState.Decision
                if case .stats = frame.body {
                    decision = .answer(.stats(stats(core)))
                } else {
                    decision = core.node.decide(
                        request, requestID: frame.requestID, wallMillis: wall, generator: &core.generator,
                        operations: &operations)
                }
                let ticket = operations.isEmpty ? nil : core.queue.reserve(records: operations.count)
                return (decision, ticket, core.queue.reserved, !core.queue.allDurable)
            }
            if let ticket {
                fill(ticket, encoding: operations, with: encoder)
                operations.removeAll(keepingCapacity: true)
            }
            decisions.append(decision)
            through = max(through, seen)
            mustWait = mustWait || undurable
        }
        let answers = Answers(requestIDs: requestIDs, decisions: decisions)
        guard mustWait else { return deliverCounted(Waiter(answers: answers, deliver: deliver)) }
        let (ready, startCommit) = core.withLockedValue { core -> (Waiter?, Bool) in
            let ready = core.queue.wait(Waiter(answers: answers, deliver: deliver), through: through)
            return (ready, core.startCommit())
        }
        if let ready { deliverCounted(ready) }
        if startCommit { writer.queue.async { self.commitLoop() } }
    }

    /// Encodes the operations of reserved `ticket` and fills it. An operation that does not
    /// encode is a fault of this node, not of the request: the node stops accepting requests,
    /// as when its log fails.
    private func fill(_ ticket: UInt64, encoding operations: [LoggedOperation], with encoder: OperationEncoder) {
        var segments = [LogSegment]()
        var failed: StorageError?
        do {
            segments = try OperationSegments.encode(operations, with: encoder)
        } catch {
            failed = error
        }
        core.withLockedValue { core in
            if let failed, core.failure == nil {
                core.failure = WireError(code: .unavailable, message: "node storage failed: \(failed)", retryable: true)
            }
            core.queue.fill(ticket, with: segments)
        }
        if let failed { fail(failed) }
    }

    private func deliverCounted(_ waiter: Waiter) {
        counters.record(waiter.answers.decisions)
        waiter.deliver(waiter.answers)
    }

    /// What one pass of the commit loop does.
    private enum CommitPass {
        /// Make these segments durable: `records` operations, through ticket `through`.
        case write([LogSegment], records: Int, through: UInt64, clock: HLCTimestamp)
        /// The node failed: refuse these answers.
        case refuse([Waiter], WireError)
        /// Nothing to take; the loop ends.
        case done
    }

    /// Runs on the writer's queue until nothing can be taken: each pass takes every filled
    /// ticket it can (see ``CommitQueue``) and makes them durable with one journal entry (group
    /// commit), then releases the answers that waited for them. A pass that follows another
    /// may first wait for more operations to join it (see ``CommitPacing``).
    private func commitLoop() {
        var followsAnotherPass = false
        while true {
            if pacing.delayMicros > 0 {
                let pending = core.withLockedValue { $0.queue.pendingRecords }
                let delay = pacing.delay(pendingOperations: pending, followsAnotherPass: followsAnotherPass)
                if delay > 0 { usleep(delay) }
            }
            followsAnotherPass = true
            let pass = core.withLockedValue { core -> CommitPass in
                if let failure = core.failure {
                    core.commitRunning = false
                    return .refuse(core.queue.removeAllWaiters(), failure)
                }
                let records = core.queue.pendingRecords
                guard let taken = core.queue.take() else {
                    core.commitRunning = false
                    return .done
                }
                return .write(
                    taken.contents.flatMap { $0 }, records: records - core.queue.pendingRecords, through: taken.through,
                    clock: core.node.clock.last)
            }
            switch pass {
            case .done:
                return
            case .refuse(let waiters, let failure):
                return refuse(waiters, with: failure)
            case .write(let segments, let records, let through, let clock):
                switch writer.write(segments, records: records, clock: clock) {
                case .success(let committed):
                    let released = core.withLockedValue { core in
                        core.durableOperations = committed.durable
                        core.commits += 1
                        core.commitLatency.record(micros: committed.syncMicros)
                        return core.queue.markDurable(through: through)
                    }
                    commitLatencyMetric.recordMicroseconds(committed.syncMicros)
                    for waiter in released { deliverCounted(waiter) }
                case .failure(let error):
                    core.withLockedValue { core in
                        if core.failure == nil {
                            core.failure = WireError(code: .unavailable, message: "node storage failed: \(error)", retryable: true)
                        }
                    }
                    fail(error)
                }
            }
        }
    }

    /// Reports a failure of the node's storage, after which every request is refused.
    private func fail(_ error: StorageError) {
        logger.critical("the operation log failed; refusing all requests", metadata: ["error": "\(error)"])
        onFatalError(error)
    }

    private func refuse(_ waiters: [Waiter], with failure: WireError) {
        for waiter in waiters {
            let refused = waiter.answers.requestIDs.map { _ in NodeState.Decision.answer(.error(failure)) }
            deliverCounted(Waiter(answers: Answers(requestIDs: waiter.answers.requestIDs, decisions: refused), deliver: waiter.deliver))
        }
    }

    /// The node's statistics.
    public func stats() -> StatsMessage {
        core.withLockedValue { stats($0) }
    }

    private func stats(_ core: borrowing Core) -> StatsMessage {
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
        message.logCommits = core.commits
        message.commitLatency = core.commitLatency
        return message
    }

    /// Refuses new requests, waits for queued commits, and closes storage (releasing the lock).
    public func close() {
        let startCommit = core.withLockedValue { core in
            if core.failure == nil {
                core.failure = WireError(code: .unavailable, message: "the node is shutting down", retryable: true)
            }
            return core.startCommit()
        }
        // Answers still waiting are refused by that pass, queued ahead of the close.
        if startCommit { writer.queue.async { self.commitLoop() } }
        writer.close()
        logger.info("storage closed")
    }
}

/// Milliseconds since the Unix epoch from the system clock.
@Sendable public func wallClockMillis() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
}
