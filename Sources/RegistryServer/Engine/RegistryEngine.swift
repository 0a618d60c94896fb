import Platform
import Logging
import RegistryAuth
import RegistryCore
import RegistryStorage
import RegistryVersion
import RegistryWire
import Synchronization

/// A node: it opens storage, and is the request path. Every request a connection reads, and every
/// peer's batch, is decided here under the engine's one lock by ``NodeState`` (fast, in memory);
/// what that changes is made durable by the ``CommitPipeline``, and an answer goes only once every
/// operation it reports, and every operation applied before it, is durable: while a commit runs,
/// even read-only answers wait for it. The other jobs have owners of their own, which this type
/// builds and wires: ``ReplicaWaits`` (answers that wait for peers), ``CausalHolding`` (requests
/// that wait for what their tokens name), ``OwnMembership``, ``SnapshotInstall`` and
/// ``StatsReport``. docs/architecture.md draws them, with the thread each runs on.
public final class RegistryEngine: Sendable {
    public let nodeID: NodeID
    public let clusterID: String
    /// Who this node is to its peers.
    let peerIdentity: PeerIdentity
    /// Drawn at start: a node that dials its own address recognises itself by it.
    let instanceID = UInt64.random(in: 1...UInt64.max)
    public let limits: Limits
    /// The config file's vendor rules (the seed at a first start; see ``resolver(capacity:)`` for
    /// the rules in force).
    public let configuredRules: VendorRules
    public static let serverVersion = "registryd \(BuildVersion.description)"
    /// Hashes presented identifiers (see ``IdentifierKey``); validation runs off the lock.
    let identifierKey: IdentifierKey
    /// Verifies client tokens (``NodeConfiguration/tokenSecret``); nil: none are required.
    let tokens: TokenKey?

    let core: SharedCore
    let pipeline: CommitPipeline
    /// The data directory's lock (nil on a simulated disk), held until ``close()``.
    private let lock: Mutex<DataDirectory?>
    /// The journal: where its files are, and what each holds (shared with the writer, the
    /// snapshots and log readers).
    private let fs: any FileSystem
    private let directory: String
    let index: JournalIndex
    let counters = ServerCounters()
    /// The operations most recently made durable, for the peer links.
    let recent = RecentOperations()
    let links = LinkedPeers()
    let replicas: ReplicaWaits
    let causal: CausalHolding
    let membership: OwnMembership
    private let snapshotInstall: SnapshotInstall
    private let statsReport: StatsReport
    let logger: Logger
    let wallClock: @Sendable () -> UInt64
    /// The change feed and its watchers (``WatchHandler`` serves each).
    let watchHub: WatchHub
    /// `--watch-progress` and `--causal-timeout`, for the watchers.
    let watchTimes: (progressMillis: UInt64, catchUpMillis: UInt64)

    /// Opens the data directory, loads the newest snapshot and replays the journal after it into
    /// memory, and restores the clock and sequence. `fs` is the disk (a simulated one in tests);
    /// the real one's data directory is locked for this process. `epochEntropy` gives the new
    /// epoch its random bits (``EpochRule``; a seeded simulation passes its own). `onFatalError`
    /// is called once, off the lock, when the log fails; registryd shuts down on it.
    public init(
        configuration: NodeConfiguration, logger: Logger, wallClock: @escaping @Sendable () -> UInt64 = SystemClock.wallMillis,
        fs: any FileSystem = PosixFileSystem(), epochEntropy: UInt64 = UInt64.random(in: .min ... .max),
        onFatalError: @escaping @Sendable (StorageError) -> Void = { _ in }
    ) throws(NodeStartupError) {
        let path = configuration.dataDirectory
        do {
            lock = Mutex(fs is PosixFileSystem ? try DataDirectory(path: path) : nil)
        } catch {
            throw .storage(error)
        }
        let start = try EngineStartup(configuration: configuration, fs: fs, logger: logger, wallClock: wallClock, epochEntropy: epochEntropy)
        let recovered = start.recovered
        (identifierKey, nodeID, peerIdentity) = (start.identifierKey, start.nodeID, start.peerIdentity)
        core = SharedCore(start.core)
        let snapshots = start.snapshotter(configuration: configuration, fs: fs, logger: logger)
        (self.fs, directory, index) = (fs, path, recovered.index)
        tokens = configuration.tokenSecret.map { TokenKey(secret: $0) }
        clusterID = configuration.clusterID
        limits = configuration.limits
        configuredRules = start.defaultScope.rules
        replicas = ReplicaWaits(
            defaultAckReplicas: configuration.ackReplicas, timeoutMillis: configuration.replicaTimeoutMillis, counters: counters,
            wallClock: wallClock)
        watchHub = WatchHub(feed: recovered.feed, maxWatchers: configuration.maxWatchers)
        watchTimes = (configuration.watchProgressMillis, configuration.causalTimeoutMillis)
        pipeline = CommitPipeline(
            core: core, writer: try start.logWriter(configuration: configuration, fs: fs), snapshots: snapshots, pacing: configuration.commitPacing, recent: recent, counters: counters,
            replicas: replicas, watchHub: watchHub, logger: logger, onFatalError: onFatalError)
        causal = CausalHolding(core: core, counters: counters, timeoutMillis: configuration.causalTimeoutMillis, wallClock: wallClock)
        membership = OwnMembership(core: core, pipeline: pipeline, nodeID: nodeID, wallClock: wallClock, logger: logger)
        snapshotInstall = SnapshotInstall(
            core: core, pipeline: pipeline, files: snapshots, journal: (fs, path, recovered.index), ownLog: peerIdentity.ownLog,
            tables: start.servingTables, logger: logger)
        statsReport = StatsReport(
            nodeID: nodeID, clusterID: clusterID, startedAt: wallClock(), counters: counters, index: recovered.index, snapshots: snapshots,
            links: links, wallClock: wallClock)
        self.logger = logger
        self.wallClock = wallClock
        start.logOpened(logger)
        start.logDefaultScope(logger)
        seedVendorRules()
        pipeline.startErasureChecks()
    }

    /// At the first start of a node that never heard of the cluster's vendor rules, logs the
    /// config file's as the seed (``VendorRuleHistory``: the earliest start's seed counts). A
    /// node that holds the cluster's rules keeps them, and says so when its file differs.
    private func seedVendorRules() {
        let wall = wallClock()
        let (seeded, inForce) = core.withLockedValue { core -> (Bool, VendorRules) in
            let seeded = core.commits.recordOperations { operations in
                core.node.seedVendorRules(wallMillis: wall, operations: &operations)
            }
            return (seeded, core.node.rules)
        }
        if seeded {
            pipeline.enqueue(.own(done: {}), waits: true)
        } else if !configuredRules.rules.isEmpty, Set(inForce.rules) != Set(configuredRules.rules) {
            logger.warning(
                "the config file's vendors differ from the cluster's; keeping the cluster's (registryctl vendor list shows them)",
                metadata: ["cluster": "\(inForce.rules.map(\.name))", "file": "\(configuredRules.rules.map(\.name))"])
        }
    }

    /// Takes snapshots, and receives and installs peers' (the snapshot files' one owner).
    var snapshots: Snapshotter { pipeline.snapshots }

    /// Answers `frames` in order and calls `deliver` with the responses once they may be sent:
    /// at once when nothing is waiting to become durable, otherwise from the writer's queue.
    public func submit(_ frames: [ClientFrame], deliver: @escaping Delivery) {
        var resolver = resolver(capacity: 0)
        submit(frames, resolver: &resolver, access: .unrestricted, deliver: deliver)
    }

    /// A resolver of the vendor rules in force now, remembering `capacity` bundles. The rules can
    /// change (``VendorRuleHistory``): ``submit(_:resolver:access:deliver:causalDeadline:)``
    /// prepares again, under the lock, what was prepared with older rules, and renews the
    /// resolver.
    func resolver(capacity: Int) -> BundleResolver {
        core.withLockedValue { core in
            core.node.refreshRules()
            return BundleResolver(rules: core.node.rules, version: core.node.rulesVersion, capacity: capacity)
        }
    }

    /// As ``submit(_:deliver:)``, validating bundles through the caller's `resolver`.
    ///
    /// Validation runs before the lock, and the lock is taken once per frame rather than once
    /// for the group, so that other connections and the log writer interleave with a long
    /// group. Ordering stays safe: a group that changed or observed anything not yet durable
    /// (pending, or in a running commit) is answered only after a later commit pass, and it
    /// starts that commit itself when none is running.
    /// `access` is what the connection's token allows (``ConnectionAccess``).
    ///
    /// A group in which a request carries a causal token naming operations the node does not
    /// hold yet waits whole (``CausalHolding``); every answer of a group carries one token, taken
    /// as the last request is decided, which covers what each of them saw.
    ///
    /// Every request a connection reads comes here, and is routed and its access checked here
    /// (``ConnectionAccess/authorize(_:)``): a snapshot request that its token allows leaves the
    /// group, to be answered on its own once the snapshot is written, seconds later.
    func submit(
        _ frames: [ClientFrame], resolver: inout BundleResolver, access: ConnectionAccess, deliver: @escaping Delivery,
        causalDeadline: UInt64? = nil
    ) {
        var frames = frames
        var prepared = frames.map {
            access.authorize(NodeState.prepare($0.body, resolver: &resolver, limits: limits, identifierKey: identifierKey))
        }
        var index = 0
        while index < prepared.count {
            guard case .read(.snapshot) = prepared[index] else {
                index += 1
                continue
            }
            submitSnapshot(requestID: frames.remove(at: index).requestID, deliver: deliver)
            prepared.remove(at: index)
        }
        if frames.isEmpty { return }
        if frames.contains(where: { !$0.after.isEmpty }),
            causal.hold(
                frames, prepared: &prepared, access: access, deliver: deliver, deadline: causalDeadline,
                expire: { self.wakeCausalWaiters(self.causal.expired()) })
        {
            return
        }
        let replicasWanted = replicas.wanted(by: frames, prepared: &prepared) { links.count(members: members, own: nodeID) }
        links.refuseLiveRemovals(&prepared)
        links.holdMovesBackFromOldMembers(&prepared, members: { members }, own: nodeID)
        let requestIDs = frames.map(\.requestID)
        let submittedNanos = SystemClock.monotonicNanos()
        let wall = wallClock()
        let clonesAllowed = links.clonesAllowed(wallMillis: wall, members: { members }, own: nodeID)
        var decisions = [NodeState.Decision]()
        decisions.reserveCapacity(frames.count)
        var mustWait = false
        var ownThrough: UInt64 = 0
        var token = CausalToken.empty
        // Every request of the group was prepared with these rules.
        let preparedWith = resolver.version
        var renewed: BundleResolver?
        for (index, (frame, request)) in zip(frames, prepared).enumerated() {
            let last = index == frames.count - 1
            let (decision, waits, through) = core.withLockedValue { core -> (NodeState.Decision, Bool, UInt64) in
                if let failure = core.commits.failure { return (.answer(.error(failure)), false, 0) }
                // Prepared with rules older than those in force (the cluster changed them since):
                // prepared again with these. Only what the rules decide is (a request refused
                // meanwhile, for its replicas say, stays refused).
                var request = request
                core.node.clonesAllowed = clonesAllowed
                core.node.refreshRules()
                if preparedWith != core.node.rulesVersion, request.dependsOnVendorRules {
                    if renewed?.version != core.node.rulesVersion {
                        renewed = BundleResolver(rules: core.node.rules, version: core.node.rulesVersion, capacity: resolver.capacity)
                    }
                    request = access.authorize(NodeState.prepare(frame.body, resolver: &renewed!, limits: limits, identifierKey: identifierKey))
                }
                // Anything pending or being committed is not durable yet: whoever saw it waits.
                let undurable = core.commits.holdsUndurable
                let before = core.commits.pendingOperations.count
                let decision: NodeState.Decision
                if case .read(.stats) = request {
                    decision = .answer(.stats(statsReport.message(core)))
                } else {
                    decision = core.commits.recordOperations { operations in
                        core.node.decide(
                            request, requestID: frame.requestID, wallMillis: wall, generator: &core.generator, operations: &operations,
                            access: access)
                    }
                }
                let wrote = core.commits.pendingOperations.count > before
                // Everything the vector holds now is durable, or will be before this group's
                // answers go (they wait for the pass that holds it), so the token never names an
                // operation that a crash could take back.
                // (A node without peers answers none, without building its vector.)
                if last, core.causalFloor != nil { token = core.node.versionVector.causalToken(above: core.causalFloor) }
                return (decision, undurable || wrote, wrote ? core.node.nextSequence - 1 : 0)
            }
            decisions.append(decision)
            mustWait = mustWait || waits
            ownThrough = max(ownThrough, through)
        }
        if let renewed { resolver = renewed }
        let waiter = Waiter(
            answers: Answers(requestIDs: requestIDs, decisions: decisions, token: token), deliver: deliver,
            replicas: ownThrough > 0 ? replicasWanted : 0, ownThrough: ownThrough, submittedNanos: submittedNanos)
        pipeline.enqueue(.client(waiter), waits: mustWait)
    }

    /// Submits again held groups (taken out under the lock, and submitted after it): those a peer's
    /// batch or a snapshot let through, and those whose deadline passed.
    func wakeCausalWaiters(_ woken: [CausalWaits<CausalWaiter>.Released]) {
        for (waiter, deadline) in woken {
            var resolver = resolver(capacity: 0)
            submit(waiter.frames, resolver: &resolver, access: waiter.access, deliver: waiter.deliver, causalDeadline: deadline)
        }
    }

    /// Answers a snapshot request (`requestID`) once the snapshot is taken.
    public func submitSnapshot(requestID: UInt64, deliver: @escaping Delivery) {
        pipeline.snapshotNow { outcome in
            let answers = Answers(requestIDs: [requestID], decisions: [.answer(ServerBody(snapshotOutcome: outcome))])
            self.pipeline.deliverCounted(Waiter(answers: answers, deliver: deliver))
        }
    }

    /// Applies a peer's batch of operations through the one remote path
    /// (``NodeState/applyRemoteBatch(_:wallMillis:applied:)``) and makes what it applied durable
    /// through the same group commit as client writes. `deliver` gets what this node then holds
    /// of the batch's logs, once that is durable (as is everything applied before it), or why
    /// the batch was refused whole.
    public func submitRemote(
        _ operations: [LoggedOperation], deliver: @escaping @Sendable (Result<[LogPosition], WireError>) -> Void
    ) {
        let wall = wallClock()
        var woken = [CausalWaits<CausalWaiter>.Released]()
        let (result, waits) = core.withLockedValue { core -> (Result<[LogPosition], WireError>, Bool) in
            if let failure = core.commits.failure { return (.failure(failure), false) }
            let undurable = core.commits.holdsUndurable
            let before = core.commits.pendingOperations.count
            let refusal = core.commits.recordOperations { pending in
                core.node.applyRemoteBatch(operations, wallMillis: wall, applied: &pending)
            }
            // A refusal waits for what is being made durable too, so that the peer hears of its
            // earlier batches (acknowledged) before it hears of this one (refused).
            if let refusal { return (.failure(refusal.wireError), undurable) }
            woken = core.coveredCausalWaiters()
            // What the node holds of every log, all of it durable by the time the answer goes.
            return (.success(core.node.versionVector.positions), undurable || core.commits.pendingOperations.count > before)
        }
        wakeCausalWaiters(woken)
        if case .failure(let error) = result, error.code == .clockSkew {
            counters.record(error: .clockSkew)
            counters.hlcRefusals.increment()
            logger.warning("refused a peer's batch: clock skew", metadata: ["error": "\(error.message)"])
        }
        pipeline.enqueue(.peerBatch(result, deliver: deliver), waits: waits)
    }

    /// Checks and installs the snapshot a peer sent (``SnapshotInstall``); returns what the node
    /// then holds durably, or why it was refused.
    func installIncomingSnapshot() -> Result<VersionVector, WireError> {
        let (outcome, woken) = snapshotInstall.install()
        if case .success = outcome {
            wakeCausalWaiters(woken)
            pipeline.notifyDurable()
        }
        return outcome
    }

    /// The cluster's members, as this node's operations leave them.
    public var members: [NodeID: Member] {
        core.withLockedValue { $0.node.registry.clusterMembers }
    }

    /// What is durable of every log now.
    public var durableVector: VersionVector {
        core.withLockedValue { $0.durable.vector }
    }

    /// A reader of `log` from sequence `from`, following the journal as the node commits.
    public func logReader(for log: LogID, from: UInt64) throws(JournalReadError) -> LogReader {
        LogReader(try JournalReader(log: log, from: from, in: directory, on: fs, index: index))
    }

    /// Journal files holding operations of a log past `floor[log]` stay, even once a snapshot
    /// covers them (the cluster sets it to what every member holds); nil lifts it.
    public func setRetentionFloor(_ floor: [LogID: UInt64]?) {
        core.withLockedValue { $0.causalFloor = floor }
        // What every member holds no link needs from memory either.
        recent.keepOnly(unheldBy: floor)
        snapshots.setRetentionFloor(floor)
    }

    /// The node's statistics.
    public func stats() -> StatsMessage {
        core.withLockedValue { statsReport.message($0) }
    }

    /// Refuses new requests, waits for queued commits, snapshots what is new (so that the next
    /// start-up replays little), and closes storage (releasing the lock).
    public func close() {
        pipeline.close(refusing: WireError(code: .unavailable, message: "the node is shutting down", retryable: true))
        lock.withLock { $0 = nil }
        logger.info("storage closed")
    }
}
