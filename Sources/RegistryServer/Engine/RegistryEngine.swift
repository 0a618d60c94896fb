import Platform
import Logging
import RegistryAuth
import RegistryCore
import RegistryStorage
import RegistryVersion
import RegistryWire
import Synchronization

/// A node's front door: it opens storage, builds the owners of the node's jobs and wires them,
/// and forwards its callers to them. Client requests go to ``ClientRequests``, peers' batches to
/// ``PeerBatches``, and what they change is made durable by the ``CommitPipeline``; the other
/// owners are ``ReplicaWaits``, ``CausalHolding``, ``OwnMembership``, ``SnapshotInstall`` and
/// ``StatsReport``. docs/architecture.md draws them, with the thread each runs on.
public final class RegistryEngine: Sendable {
    public let nodeID: NodeID
    public let clusterID: String
    /// Who this node is to its peers.
    let peerIdentity: PeerIdentity
    /// Drawn at start: a node that dials its own address recognises itself by it.
    let instanceID = UInt64.random(in: 1...UInt64.max)
    public let limits: Limits
    /// The config file's vendor rules (the seed at a first start; see
    /// ``ClientRequests/resolver(capacity:)`` for the rules in force).
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
    /// The client request path: every request a connection reads.
    let requests: ClientRequests
    /// The remote path: every peer's batch.
    private let peerBatches: PeerBatches
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
    /// epoch its random bits (``EpochRule``; a seeded simulation passes its own), and
    /// `catchUpTiming` times a vendor rule change's wait for its peers (the simulation drives
    /// it too). `onFatalError` is called once, off the lock, when the log fails; registryd shuts
    /// down on it.
    public init(
        configuration: NodeConfiguration, logger: Logger, wallClock: @escaping @Sendable () -> UInt64 = SystemClock.wallMillis,
        fs: any FileSystem = PosixFileSystem(), epochEntropy: UInt64 = UInt64.random(in: .min ... .max),
        catchUpTiming: CatchUpTiming = .system, onFatalError: @escaping @Sendable (StorageError) -> Void = { _ in }
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
        // The hello tells a watcher how often it hears from an idle stream, so that its idle
        // timeout never gives up a node that is only quiet.
        var limits = configuration.limits
        limits.watchProgressMillis = UInt32(clamping: configuration.watchProgressMillis)
        self.limits = limits
        configuredRules = start.defaultScope.rules
        replicas = ReplicaWaits(
            defaultAckReplicas: configuration.ackReplicas, timeoutMillis: configuration.replicaTimeoutMillis, counters: counters)
        watchHub = WatchHub(feed: recovered.feed, maxWatchers: configuration.maxWatchers)
        watchTimes = (configuration.watchProgressMillis, configuration.causalTimeoutMillis)
        pipeline = CommitPipeline(
            core: core, writer: try start.logWriter(configuration: configuration, fs: fs), snapshots: snapshots, pacing: configuration.commitPacing, recent: recent, counters: counters,
            replicas: replicas, watchHub: watchHub, logger: logger, onFatalError: onFatalError)
        membership = OwnMembership(core: core, pipeline: pipeline, nodeID: nodeID, wallClock: wallClock, logger: logger)
        snapshotInstall = SnapshotInstall(
            core: core, pipeline: pipeline, files: snapshots, journal: (fs, path, recovered.index), ownLog: peerIdentity.ownLog,
            tables: start.servingTables, wallClock: wallClock, logger: logger)
        statsReport = StatsReport(
            nodeID: nodeID, clusterID: clusterID, startedAt: wallClock(), counters: counters, index: recovered.index, snapshots: snapshots,
            links: links, wallClock: wallClock)
        requests = ClientRequests(
            nodeID: nodeID, limits: limits, identifierKey: identifierKey, core: core, pipeline: pipeline,
            causal: CausalHolding(
                core: core, counters: counters, timeoutMillis: configuration.causalTimeoutMillis, deadlineClock: SystemClock.monotonicMillis),
            replicas: replicas, links: links, statsReport: statsReport, wallClock: wallClock, catchUpTiming: catchUpTiming)
        peerBatches = PeerBatches(
            core: core, pipeline: pipeline, requests: requests, counters: counters, logger: logger, wallClock: wallClock)
        self.logger = logger
        self.wallClock = wallClock
        start.logOpened(logger)
        start.logDefaultScope(logger)
        // A member of a cluster keeps every journal file until the cluster says what its members
        // hold (``setRetentionFloor(_:)``, once replication starts): a snapshot taken before
        // would trim files a lagging member still needs from this journal.
        if members.contains(where: { $0.key != nodeID && !$0.value.removed }) { setRetentionFloor([:]) }
        seedVendorRules()
        pipeline.startErasureChecks()
    }

    /// At the first start of a node that never heard of the cluster's vendor rules, logs the
    /// config file's as the seed (``VendorRuleHistory``: the earliest start's seed counts), and
    /// returns once that is durable. A node that holds the cluster's rules keeps them, and says
    /// so when its file differs.
    private func seedVendorRules() {
        let wall = wallClock()
        let (seeded, inForce) = core.withLockedValue { core -> (Bool, VendorRules) in
            let seeded = core.commits.recordOperations { operations in
                core.node.seedVendorRules(wallMillis: wall, operations: &operations)
            }
            return (seeded, core.node.rules)
        }
        if seeded {
            // Durable before the node serves: the first commit is the seed's alone, whatever
            // arrives next, so that a start writes the same journal every time.
            pipeline.enqueue(.own(done: {}), waits: true)
            pipeline.betweenCommits {}
        } else if !configuredRules.rules.isEmpty, Set(inForce.rules) != Set(configuredRules.rules) {
            logger.warning(
                "the config file's vendors differ from the cluster's; keeping the cluster's (registryctl vendor list shows them)",
                metadata: ["cluster": "\(inForce.rules.map(\.name))", "file": "\(configuredRules.rules.map(\.name))"])
        }
    }

    /// Takes snapshots, and receives and installs peers' (the snapshot files' one owner).
    var snapshots: Snapshotter { pipeline.snapshots }

    /// Answers `frames` in order and calls `deliver` with the responses once they may be sent:
    /// at once when nothing is waiting to become durable, otherwise from the writer's queue
    /// (``ClientRequests/submit(_:resolver:access:deliver:causalDeadline:refusals:caughtUp:)``).
    public func submit(_ frames: [ClientFrame], deliver: @escaping Delivery) {
        var resolver = requests.resolver(capacity: 0)
        requests.submit(frames, resolver: &resolver, access: .unrestricted, deliver: deliver)
    }

    /// Applies a peer's batch (``PeerBatches/submit(_:deliver:)``).
    public func submitRemote(
        _ operations: [LoggedOperation], deliver: @escaping @Sendable (Result<[LogPosition], WireError>) -> Void
    ) {
        peerBatches.submit(operations, deliver: deliver)
    }

    /// Checks and installs the snapshot a peer sent (``SnapshotInstall``); returns what the node
    /// then holds durably, or why it was refused.
    func installIncomingSnapshot() -> Result<VersionVector, WireError> {
        let (outcome, woken) = snapshotInstall.install()
        if case .success = outcome {
            requests.wakeCausalWaiters(woken)
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

    /// What a peer hello tells of this node: what is durable of every log, and how many device
    /// records (devices and aliases) and claims the state holds.
    var holdings: (vector: VersionVector, deviceRecords: Int, claims: Int) {
        core.withLockedValue { ($0.durable.vector, $0.node.registry.slotCount, $0.node.registry.claimCount) }
    }

    /// Sizes the state's indexes for what a peer that is far ahead holds (``PeerHoldings``), before
    /// the first operations this node takes from it, and logs it; nothing when this node is not
    /// far behind.
    func sizeIndexes(toCatchUpWith peer: NodeID, holding holdings: PeerHoldings) {
        // Read before the lock: it reads the control group's files.
        let tableBytes = MachineMemory.usableBytes / 2
        let sized = core.withLockedValue { core -> (deviceRecords: Int, claims: Int)? in
            // Counted in place: a copy of the state would share its tables, and the reserve
            // below would then copy them.
            guard
                let sizing = holdings.indexSizing(
                    ownHolds: core.node.versionVector, ownDeviceRecords: core.node.registry.slotCount,
                    ownClaims: core.node.registry.claimCount, tableBytes: tableBytes)
            else { return nil }
            return core.node.registry.reserve(slots: sizing.deviceRecords, claims: sizing.claims) ? sizing : nil
        }
        guard let sized else { return }
        logger.info(
            "sizing the indexes to catch up with a peer",
            metadata: ["peer_node": "\(peer)", "device_records": "\(sized.deviceRecords)", "claims": "\(sized.claims)"])
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
