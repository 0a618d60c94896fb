import Platform
import Dispatch
import Logging
import RegistryAuth
import Metrics
import RegistryCore
import RegistryStorage
import RegistryVersion
import RegistryWire
import NIOConcurrencyHelpers
import Synchronization

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
        /// What the answers reflect (one token for the group: see ``submit(_:resolver:access:deliver:)``).
        var token: CausalToken = .empty

        public var count: Int { requestIDs.count }

        public var frames: [ServerFrame] {
            zip(requestIDs, decisions).map { ServerFrame(requestID: $0, body: $1.body, token: token) }
        }
    }

    /// A group of requests held until the node holds what their causal tokens name.
    struct CausalWaiter: Sendable {
        let frames: [ClientFrame]
        let access: ConnectionAccess
        let deliver: Delivery
    }

    /// What waits for the operations it saw to become durable, by who asked. Only a client's
    /// group is answered with frames and counted as requests.
    enum Completion: Sendable {
        /// A client's group of requests.
        case client(Waiter)
        /// A peer's batch: what this node then holds of the batch's logs, or why it was refused.
        case peerBatch(Result<[LogPosition], WireError>, deliver: @Sendable (Result<[LogPosition], WireError>) -> Void)
        /// A change of this node's own (its membership): `done` runs once it is durable, or once
        /// the log has failed.
        case own(done: @Sendable () -> Void)
    }

    /// A client's answers, decided under the lock, waiting for their operations to become durable.
    struct Waiter: Sendable {
        let answers: Answers
        let deliver: Delivery
        /// Peers that must hold the write before the answer goes (`--ack-replicas`), and the last
        /// sequence of this node's own log that the write made; 0 and 0 for most.
        var replicas = 0
        var ownThrough: UInt64 = 0
        /// When the requests were submitted, in uptime nanoseconds, for the request latency
        /// metric; 0 for answers that are not a client's.
        var submittedNanos: UInt64 = 0
    }

    struct Core {
        var node: NodeState
        var generator = BufferedRandom()
        /// What is not durable yet, who waits for it, and whether a commit pass runs.
        var commits = CommitStateMachine<Completion>()
        var durableOperations: UInt64
        var commitCount: UInt64 = 0
        /// How long each commit's journal write and sync took.
        var commitLatency = LatencyBuckets()
        /// When the next snapshot is due.
        var snapshotPolicy: SnapshotPolicy
        /// What is durable of every log: what peers may be sent.
        var durable: VersionVector
        /// What every member holds (``setRetentionFloor(_:)``), left out of answers' tokens; nil
        /// when the node has no peers. Until the cluster sets it: nothing, so tokens name every log.
        var causalFloor: [LogID: UInt64]? = [:]
        /// Requests whose causal tokens name operations not held yet.
        var causalWaits = CausalWaits<CausalWaiter>()
    }

    public let nodeID: NodeID
    public let clusterID: String
    /// Who this node is to its peers.
    let peerIdentity: PeerIdentity
    /// Drawn at start: a node that dials its own address recognises itself by it.
    let instanceID = UInt64.random(in: 1...UInt64.max)
    public let limits: Limits
    /// When the writer waits for more operations before a commit.
    private let pacing: CommitPacing
    /// The vendor rules, for the ``BundleResolver`` each connection keeps.
    public let vendorRules: VendorRules
    public static let serverVersion = "registryd \(BuildVersion.description)"

    /// A pthread mutex: Synchronization.Mutex is a priority-inheritance futex on Linux, whose
    /// contended path costs a kernel round trip every time.
    let core: NIOLockedValueBox<Core>
    let writer: LogWriter
    /// The data directory's lock (nil on a simulated disk), held until ``close()``.
    private let lock: Mutex<DataDirectory?>
    let fs: any FileSystem
    let directory: String
    /// Devices the state is sized for (`--expected-devices`).
    let expectedDevices: Int
    /// Where the serving state's tables come from, a peer's snapshot's included.
    let servingTables: HugePageTableAllocator
    /// Set while a peer's snapshot is being received or installed: one at a time.
    let snapshotIntakeBusy = Atomic<Bool>(false)
    /// What each journal file holds (shared with the writer, the snapshots and log readers).
    let index: JournalIndex
    /// Takes snapshots in the background, and trims the journal after them.
    let snapshots: Snapshotter

    let counters = ServerCounters()
    /// Durable writes waiting for their replicas (`--ack-replicas`).
    let replicas: ReplicaWaits
    /// How long a request waits for what its causal token names (`--causal-timeout`).
    let causalTimeoutMillis: UInt64
    /// The operations most recently made durable, for the peer links.
    let recent = RecentOperations()
    /// The links to peers, for the stats (set by ``Replication``).
    let peerLinks = Mutex<(@Sendable () -> [PeerLinkStatus])?>(nil)
    /// Called after every commit (see ``observeCommits(_:)``).
    private let durableObservers = Mutex<[@Sendable () -> Void]>([])
    /// swift-metrics' view of ``Core/commitLatency``.
    private let commitLatencyMetric = Metrics.Timer(label: MetricCatalog.commitDuration.name)
    /// Operations per group commit.
    private let commitOperationsMetric = Recorder(label: MetricCatalog.commitOperations.name)
    let logger: Logger
    /// Hashes presented identifiers (see ``IdentifierKey``); validation runs off the lock.
    let identifierKey: IdentifierKey
    /// Verifies client tokens (``NodeConfiguration/tokenSecret``); nil: none are required.
    let tokens: TokenKey?
    let wallClock: @Sendable () -> UInt64
    private let startedAt: UInt64
    /// Called once, off the lock, when the log fails; registryd shuts down on it.
    private let onFatalError: @Sendable (StorageError) -> Void

    /// Opens the data directory, loads the newest snapshot and replays the journal after it into
    /// memory, and restores the clock and sequence. `fs` is the disk (a simulated one in tests);
    /// the real one's data directory is locked for this process. `epochEntropy` gives the new
    /// epoch its random bits (``EpochRule``; a seeded simulation passes its own).
    public init(
        configuration: NodeConfiguration, logger: Logger, wallClock: @escaping @Sendable () -> UInt64 = SystemClock.wallMillis,
        fs: any FileSystem = PosixFileSystem(), epochEntropy: UInt64 = UInt64.random(in: .min ... .max),
        onFatalError: @escaping @Sendable (StorageError) -> Void = { _ in }
    ) throws(NodeStartupError) {
        let path = configuration.dataDirectory
        if fs is PosixFileSystem {
            do {
                lock = Mutex(try DataDirectory(path: path))
            } catch {
                throw .storage(error)
            }
        } else {
            lock = Mutex(nil)
        }
        let secret = try ClusterSecret.resolve(
            configured: configuration.clusterSecret, clusterID: configuration.clusterID, fs: fs, directory: path, logger: logger)
        let mintingKey = MintingKey(secret: secret)
        let identifierKey = IdentifierKey(secret: secret)
        let servingTables = HugePageTableAllocator(releaseGradually: configuration.releaseTablesGradually)
        let recovered = try StorageStartup.open(
            fs: fs, directory: path, configuredNodeID: configuration.nodeID, identifierKey: identifierKey.fingerprint,
            expectedDevices: configuration.expectedDevices,
            tables: servingTables, wallClock: wallClock, epochEntropy: epochEntropy, logger: logger)
        let nodeID = NodeID(trusted: recovered.metadata.nodeID)
        self.peerIdentity = PeerIdentity(
            clusterID: configuration.clusterID, nodeID: nodeID, epoch: recovered.metadata.epoch,
            mintingKeyFingerprint: mintingKey.fingerprint, proof: PeerProof(secret: secret),
            vendorRulesFingerprint: configuration.vendorRules.fingerprint)
        let epoch = recovered.metadata.epoch
        let ownLog = LogID(origin: nodeID, epoch: epoch)
        let node = NodeState(
            registry: recovered.registry,
            clock: HybridLogicalClock(last: recovered.clock, maxForwardDriftMillis: configuration.maxClockSkewMillis), nodeID: nodeID,
            epoch: epoch,
            nextSequence: recovered.versionVector[ownLog] + 1, versionVector: recovered.versionVector, rules: configuration.vendorRules,
            limits: configuration.limits, mintingKey: mintingKey, identifierKey: identifierKey)
        self.identifierKey = identifierKey
        self.tokens = configuration.tokenSecret.map { TokenKey(secret: $0) }
        let durable = recovered.versionVector.sequences
        let operations = durable.values.reduce(0, +)
        let policy = SnapshotPolicy(
            everyOperations: UInt64(configuration.snapshotEveryOperations), everySeconds: UInt64(configuration.snapshotEverySeconds),
            coveredOperations: recovered.snapshotLabel ?? 0, nowNanos: SystemClock.monotonicNanos())
        self.core = NIOLockedValueBox(
            Core(node: node, durableOperations: operations, snapshotPolicy: policy, durable: recovered.versionVector))
        do {
            self.writer = try LogWriter(
                fs: fs, directory: path, journalFile: recovered.nextJournalFile, fileBytes: configuration.journalFileBytes,
                index: recovered.index, durableThrough: durable)
        } catch {
            throw .storage(error)
        }
        self.index = recovered.index
        self.fs = fs
        self.directory = path
        self.expectedDevices = configuration.expectedDevices
        self.servingTables = servingTables
        self.snapshots = Snapshotter(
            fs: fs, directory: path, index: recovered.index, nodeID: nodeID, epoch: epoch, expectedDevices: configuration.expectedDevices,
            tables: HugePageTableAllocator(inBackground: false), logger: logger)
        self.nodeID = nodeID
        self.clusterID = configuration.clusterID
        self.limits = configuration.limits
        self.pacing = configuration.commitPacing
        self.replicas = ReplicaWaits(
            defaultAckReplicas: configuration.ackReplicas, timeoutMillis: configuration.replicaTimeoutMillis, counters: counters,
            wallClock: wallClock)
        self.causalTimeoutMillis = configuration.causalTimeoutMillis
        self.vendorRules = configuration.vendorRules
        self.logger = logger
        self.wallClock = wallClock
        self.startedAt = wallClock()
        self.onFatalError = onFatalError
        logger.info(
            "storage open",
            metadata: [
                "operations": "\(operations)", "devices": "\(recovered.registry.deviceCount)", "claims": "\(recovered.registry.claimCount)",
                "epoch": "\(epoch)", "next_sequence": "\(recovered.versionVector[ownLog] + 1)",
            ])
    }

    /// Answers `frames` in order and calls `deliver` with the responses once they may be sent:
    /// at once when nothing is waiting to become durable, otherwise from the writer's queue.
    public func submit(_ frames: [ClientFrame], deliver: @escaping Delivery) {
        var resolver = BundleResolver(rules: vendorRules, capacity: 0)
        submit(frames, resolver: &resolver, access: .unrestricted, deliver: deliver)
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
    /// hold yet waits whole (``holdForTokens``); every answer of a group carries one token, taken
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
            holdForTokens(frames, prepared: &prepared, access: access, deliver: deliver, deadline: causalDeadline)
        {
            return
        }
        let replicasWanted = replicas.wanted(by: frames, prepared: &prepared, peers: peerCount)
        refuseLiveRemovals(&prepared)
        let requestIDs = frames.map(\.requestID)
        let submittedNanos = SystemClock.monotonicNanos()
        let wall = wallClock()
        var decisions = [NodeState.Decision]()
        decisions.reserveCapacity(frames.count)
        var mustWait = false
        var ownThrough: UInt64 = 0
        var token = CausalToken.empty
        for (index, (frame, request)) in zip(frames, prepared).enumerated() {
            let last = index == frames.count - 1
            let (decision, waits, through) = core.withLockedValue { core -> (NodeState.Decision, Bool, UInt64) in
                if let failure = core.commits.failure { return (.answer(.error(failure)), false, 0) }
                // Anything pending or being committed is not durable yet: whoever saw it waits.
                let undurable = core.commits.holdsUndurable
                let before = core.commits.pendingOperations.count
                let decision: NodeState.Decision
                if case .read(.stats) = request {
                    decision = .answer(.stats(stats(core)))
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
        let waiter = Waiter(
            answers: Answers(requestIDs: requestIDs, decisions: decisions, token: token), deliver: deliver,
            replicas: ownThrough > 0 ? replicasWanted : 0, ownThrough: ownThrough, submittedNanos: submittedNanos)
        enqueue(.client(waiter), waits: mustWait)
    }

    // MARK: - Causal tokens (read your writes across nodes)

    /// Holds the group when a request's token names operations this node does not hold yet, and
    /// returns true; the group is submitted again once they arrive (``wakeCausalWaiters(_:)``),
    /// or when `deadline` (`--causal-timeout` after it first arrived) passes. Past the deadline,
    /// or with a timeout of 0, such a request is answered NOT_CAUGHT_UP instead, naming the nodes
    /// that hold what it needs, and the rest of the group goes on. A token that names no valid
    /// log is refused as the request's error.
    private func holdForTokens(
        _ frames: [ClientFrame], prepared: inout [NodeState.Prepared], access: ConnectionAccess, deliver: @escaping Delivery,
        deadline: UInt64?
    ) -> Bool {
        var required = [VersionVector?](repeating: nil, count: frames.count)
        for index in frames.indices where !frames[index].after.isEmpty {
            if case .refused = prepared[index] { continue }
            let after = frames[index].after
            guard after.positions.count <= CausalToken.maxPositions else {
                prepared[index] = .refused(
                    WireError(
                        code: .invalidArgument,
                        message: "the causal token names \(after.positions.count) logs, more than \(CausalToken.maxPositions)"))
                continue
            }
            do {
                required[index] = try VersionVector(positions: after.positions)
            } catch {
                prepared[index] = .refused(WireError(code: .invalidArgument, message: "the causal token: \(error.message)"))
            }
        }
        let now = wallClock()
        let deadline = deadline ?? now + causalTimeoutMillis
        var refusals = [(Int, WireError)]()
        let parked = core.withLockedValue { core -> Bool in
            let held = core.node.versionVector
            var unmet = [(index: Int, shortfall: [VersionVector.Shortage])]()
            var needed = VersionVector()
            for index in frames.indices {
                guard let required = required[index] else { continue }
                let shortfall = held.shortfall(against: required)
                guard !shortfall.isEmpty else { continue }
                unmet.append((index, shortfall))
                for entry in shortfall { needed.recordAll(through: max(entry.needed, needed[entry.log]), in: entry.log) }
            }
            if unmet.isEmpty { return false }
            if now < deadline {
                core.causalWaits.park(CausalWaiter(frames: frames, access: access, deliver: deliver), until: needed, deadlineMillis: deadline)
                return true
            }
            let members = core.node.registry.clusterMembers
            for (index, shortfall) in unmet {
                refusals.append((index, Self.notCaughtUp(shortfall, members: members, waited: causalTimeoutMillis)))
            }
            return false
        }
        if parked {
            counters.causalWaits.increment()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(deadline - now) + 1)) { self.expireCausalWaiters() }
            return true
        }
        for (index, error) in refusals { prepared[index] = .refused(error) }
        return false
    }

    /// NOT_CAUGHT_UP for what `shortfall` lacks: each log's origin, where it is reached, and how
    /// far this node is behind in it.
    static func notCaughtUp(
        _ shortfall: [VersionVector.Shortage], members: [NodeID: Member], waited: UInt64
    ) -> WireError {
        let logs = shortfall.map { entry -> String in
            let address = members[entry.log.origin].map { $0.address.isEmpty ? "" : " at \($0.address)" } ?? ""
            return "\(entry.log.origin)\(address) holds its log \(entry.log.epoch) through \(entry.needed), this node through \(entry.held)"
        }
        return WireError(
            code: .notCaughtUp,
            message: "this node does not hold what the causal token names after \(waited) ms: \(logs.joined(separator: "; ")); retry later, or on that node",
            retryable: true)
    }

    /// Submits again held groups (taken out under the lock, and submitted after it): those a peer's
    /// batch or a snapshot let through, and those whose deadline passed.
    func wakeCausalWaiters(_ woken: [CausalWaits<CausalWaiter>.Released]) {
        for (waiter, deadline) in woken {
            var resolver = BundleResolver(rules: vendorRules, capacity: 0)
            submit(waiter.frames, resolver: &resolver, access: waiter.access, deliver: waiter.deliver, causalDeadline: deadline)
        }
    }

    /// Answers the held groups whose deadline passed: their unmet requests get NOT_CAUGHT_UP.
    private func expireCausalWaiters() {
        let expired = core.withLockedValue { $0.causalWaits.expired(nowMillis: wallClock()) }
        wakeCausalWaiters(expired)
    }

    /// Takes the held groups that the node's vector now covers (under the lock).
    static func coveredCausalWaiters(_ core: inout Core) -> [CausalWaits<CausalWaiter>.Released] {
        core.causalWaits.isEmpty ? [] : core.causalWaits.covered(by: core.node.versionVector)
    }

    /// Completes `completion` now when it `waits` for nothing, otherwise after the commit pass
    /// that makes what it saw durable, starting one when none runs.
    private func enqueue(_ completion: Completion, waits: Bool) {
        guard waits else { return complete(completion) }
        switch core.withLockedValue({ $0.commits.answered(completion, waits: true) }) {
        case .deliver: complete(completion)
        case .wait: break
        case .waitAndStartPass: writer.queue.async { self.commitLoop() }
        }
    }

    /// What it saw is durable: a client's answers go (after their replicas, when they asked for
    /// some) and count as requests; a peer hears what this node holds; the node's own change is done.
    private func complete(_ completion: Completion) {
        switch completion {
        case .client(let waiter): deliverCounted(waiter)
        case .peerBatch(let result, let deliver): deliver(result)
        case .own(let done): done()
        }
    }

    private func deliverCounted(_ waiter: Waiter) {
        if waiter.replicas > 0 { return replicas.hold(waiter) }
        counters.record(waiter.answers.decisions, submittedNanos: waiter.submittedNanos)
        waiter.deliver(waiter.answers)
    }

    // MARK: - Peers (--ack-replicas is ReplicaWaits')

    /// A removal of a node this node streams to now is refused unless it says `force`: the node
    /// is running, and removed it would go on taking writes until it learned of it.
    private func refuseLiveRemovals(_ prepared: inout [NodeState.Prepared]) {
        for index in prepared.indices {
            guard case .removeMember(.success(let node), force: false) = prepared[index] else { continue }
            let links = peerLinks.withLock { $0 }?() ?? []
            guard links.contains(where: { $0.nodeID == node.value && $0.state == "streaming" }) else { continue }
            prepared[index] = .refused(
                WireError(
                    code: .memberReachable,
                    message: "\(node) is running: this node streams to it now. Stop it first (a removed node that runs takes writes that never replicate), or remove it with --force"))
        }
    }

    /// The peers this node streams to (its own address, once recognised, left out).
    private func peerCount() -> Int {
        ClusterPeers.count(links: peerLinks.withLock { $0 }?() ?? [], members: members, own: nodeID)
    }

    /// `peer` acknowledged holding `held` (or, `restated`, welcomed this node saying so): answers
    /// the writes that now have their replicas.
    func peer(_ peer: NodeID, holds held: VersionVector, restated: Bool = false) {
        replicas.peer(peer, holdsThrough: held[peerIdentity.ownLog], restated: restated)
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
            let waiters: [Completion]
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
            switch writer.write(operations, clock: clock) {
            case .success(let committed):
                recent.append(operations)
                let snapshotDue = core.withLockedValue { core -> Bool in
                    core.durableOperations = committed.durable
                    // Once per run of one log (a commit is a few runs), not once per operation.
                    for run in operations.runsByLog {
                        let last = operations[run.range].lazy.map(\.sequence).max()!
                        core.durable.recordAll(through: max(last, core.durable[run.log]), in: run.log)
                    }
                    core.commitCount += 1
                    core.commitLatency.record(micros: committed.syncMicros)
                    return core.snapshotPolicy.shouldStart(durableOperations: committed.durable, nowNanos: SystemClock.monotonicNanos())
                }
                if snapshotDue { startSnapshot(clock: clock, completion: nil) }
                commitLatencyMetric.recordMicroseconds(committed.syncMicros)
                commitOperationsMetric.record(operations.count)
                for completion in waiters { complete(completion) }
                notifyDurable()
            case .failure(let error):
                logger.critical("the operation log failed; refusing all requests", metadata: ["error": "\(error)"])
                let failure = WireError(code: .unavailable, message: "node storage failed: \(error)", retryable: true)
                core.withLockedValue { $0.commits.failed(failure) }
                refuse(waiters, with: failure)
                onFatalError(error)
            }
        }
    }

    /// The log failed before what `completions` saw was durable: clients get `failure` (counted),
    /// peers hear their batch refused, and the node's own changes are done with.
    private func refuse(_ completions: [Completion], with failure: WireError) {
        for completion in completions {
            switch completion {
            case .client(let waiter):
                let refused = waiter.answers.requestIDs.map { _ in NodeState.Decision.answer(.error(failure)) }
                counters.record(refused, submittedNanos: waiter.submittedNanos)
                waiter.deliver(Answers(requestIDs: waiter.answers.requestIDs, decisions: refused))
            case .peerBatch(_, let deliver): deliver(.failure(failure))
            case .own(let done): done()
            }
        }
    }

    /// Starts a snapshot through what is durable now. Runs on the writer's queue, so that nothing
    /// commits meanwhile; the snapshot itself runs on its own thread. `completion` gets its
    /// outcome, or nil when one was being taken already.
    private func startSnapshot(clock: HLCTimestamp, completion: (@Sendable (Result<Snapshotter.Taken, StorageError>?) -> Void)?) {
        dispatchPrecondition(condition: .onQueue(writer.queue))
        snapshots.start(through: writer.durableThrough, clock: clock, currentFile: writer.currentFile) { outcome in
            let covered: UInt64?
            if case .success(let taken) = outcome { covered = taken.operations } else { covered = nil }
            if outcome != nil {
                self.core.withLockedValue { $0.snapshotPolicy.finished(covering: covered, nowNanos: SystemClock.monotonicNanos()) }
            }
            completion?(outcome)
        }
    }

    /// Takes a snapshot through what is durable now, on the caller's thread and priority, commits
    /// waiting meanwhile (a stopping node; the simulation, whose steps must not depend on a
    /// background thread's scheduling).
    func snapshotInForeground() -> Result<Snapshotter.Taken, StorageError> {
        writer.queue.sync {
            let clock = core.withLockedValue { $0.node.clock.last }
            let outcome = snapshots.takeNow(through: writer.durableThrough, clock: clock, currentFile: writer.currentFile)
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
        writer.queue.async {
            let clock = self.core.withLockedValue { $0.node.clock.last }
            self.startSnapshot(clock: clock, completion: completion)
        }
    }

    /// Answers a snapshot request (`requestID`) once the snapshot is taken.
    public func submitSnapshot(requestID: UInt64, deliver: @escaping Delivery) {
        snapshotNow { outcome in
            let body: ServerBody
            switch outcome {
            case .success(let taken):
                body = .snapshotTaken(
                    SnapshotTaken(
                        operations: taken.operations, bytes: UInt64(taken.bytes), durationMillis: taken.millis,
                        journalFilesRemoved: UInt64(taken.filesRemoved)))
            case .failure(let error):
                body = .error(WireError(code: .unavailable, message: "the snapshot failed: \(error)", retryable: true))
            case nil:
                body = .error(WireError(code: .unavailable, message: "a snapshot is being taken already; ask again once it is done", retryable: true))
            }
            self.deliverCounted(Waiter(answers: Answers(requestIDs: [requestID], decisions: [.answer(body)]), deliver: deliver))
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
            woken = Self.coveredCausalWaiters(&core)
            // What the node holds of every log, all of it durable by the time the answer goes.
            return (.success(core.node.versionVector.positions), undurable || core.commits.pendingOperations.count > before)
        }
        wakeCausalWaiters(woken)
        if case .failure(let error) = result, error.code == .clockSkew {
            counters.record(error: .clockSkew)
            counters.hlcRefusals.increment()
            logger.warning("refused a peer's batch: clock skew", metadata: ["error": "\(error.message)"])
        }
        enqueue(.peerBatch(result, deliver: deliver), waits: waits)
    }

    /// Where peers reach this node, once it listens (see ``joinCluster()``).
    let advertisedAddress = Mutex<String?>(nil)

    /// Records that this node is a member reached at its advertised address, unless its members
    /// already say so: when it starts with peers, or when a peer first connects to it.
    func joinCluster() {
        guard let address = advertisedAddress.withLock({ $0 }) else { return }
        join(advertising: address)
    }

    /// Records that this node is a member reached at `address`, unless its members already say
    /// so; `done` is called once that is durable (at once when nothing was to change).
    public func join(advertising address: String, done: @escaping @Sendable () -> Void = {}) {
        // A removed node never joins again (removal is final): it would only log a join that no
        // peer accepts.
        changeOwnMembership(address: address, removed: false, done: done) { own in own?.removed != true && own?.address != address }
    }

    /// A peer refused this node as removed from the cluster: records that, as the removal
    /// operation the cluster logged (a join, so applying it again changes nothing), so that the
    /// node refuses writes from now on, across restarts too.
    func learnedRemoval() {
        if changeOwnMembership(address: "", removed: true, needed: { own in own?.removed != true }) {
            logger.error("a peer says this node was removed from the cluster: it refuses writes from now on")
        }
    }

    /// Logs a change of this node's own membership when `needed` says the members as they are
    /// lack it; `done` is called once it is durable (at once when nothing was to change).
    /// Returns whether it logged one.
    @discardableResult
    private func changeOwnMembership(
        address: String, removed: Bool, done: @escaping @Sendable () -> Void = {}, needed: (Member?) -> Bool
    ) -> Bool {
        let wall = wallClock()
        let waits = core.withLockedValue { core -> Bool in
            guard needed(core.node.registry.clusterMembers[nodeID]) else { return false }
            core.commits.recordOperations { operations in
                core.node.changeMembership(nodeID, address: address, removed: removed, wallMillis: wall, operations: &operations)
            }
            return true
        }
        guard waits else {
            done()
            return false
        }
        enqueue(.own(done: done), waits: true)
        return true
    }

    /// The cluster's members, as this node's operations leave them.
    public var members: [NodeID: Member] {
        core.withLockedValue { $0.node.registry.clusterMembers }
    }

    /// What is durable of every log now.
    public var durableVector: VersionVector {
        core.withLockedValue { $0.durable }
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

    /// A reader of `log` from sequence `from`, following the journal as the node commits.
    public func logReader(for log: LogID, from: UInt64) throws(JournalReadError) -> LogReader {
        LogReader(
            try JournalReader(
                log: log, from: from, in: directory, on: fs, index: index))
    }

    /// Journal files holding operations of a log past `floor[log]` stay, even once a snapshot
    /// covers them (the cluster sets it to what every member holds); nil lifts it.
    public func setRetentionFloor(_ floor: [LogID: UInt64]?) {
        core.withLockedValue { $0.causalFloor = floor }
        // What every member holds no link needs from memory either.
        recent.keepOnly(unheldBy: floor)
        snapshots.setRetentionFloor(floor)
    }

    /// Reads the registry state under the engine's lock (for tests and checks; it blocks requests
    /// for as long as `body` runs).
    func withState<Result>(_ body: (RegistryState) -> Result) -> Result {
        core.withLockedValue { body($0.node.registry) }
    }

    /// The node's statistics.
    public func stats() -> StatsMessage {
        core.withLockedValue { stats($0) }
    }

    /// The stats as of `core`.
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
        message.logCommits = core.commitCount
        message.commitLatency = core.commitLatency
        message.journalBytes = UInt64(index.durableBytes)
        message.journalFiles = UInt64(index.files.count)
        let (last, age) = snapshots.last
        message.snapshotOperations = core.snapshotPolicy.coveredOperations
        message.snapshotAgeMillis = age / 1_000_000
        message.snapshotBytes = UInt64(last?.bytes ?? 0)
        message.versionVector = core.node.versionVector.positions
        message.stateDigest = core.node.registry.digest
        message.writeRefusal = core.node.writeRefusal(wallMillis: wallClock())?.message ?? ""
        message.members = core.node.registry.clusterMembers.sorted { $0.key < $1.key }.map {
            ClusterMemberReport(nodeID: $0.key.value, address: $0.value.address, removed: $0.value.removed)
        }
        let now = wallClock()
        message.peers = (peerLinks.withLock { $0 }?() ?? []).map { link in
            PeerLinkReport(
                address: link.address, nodeID: link.nodeID, state: link.state, backlogOperations: link.backlogOperations,
                inFlightBatches: link.inFlightBatches,
                lagMillis: link.oldestUnacknowledgedMillis == 0 ? 0 : now &- min(now, link.oldestUnacknowledgedMillis),
                peerHolds: link.peerHolds, reconnects: link.reconnects, lastError: link.lastError, sentOperations: link.sentOperations)
        }
        return message
    }

    /// Refuses new requests, waits for queued commits, and closes storage (releasing the lock).
    public func close() {
        core.withLockedValue { $0.commits.close(with: WireError(code: .unavailable, message: "the node is shutting down", retryable: true)) }
        writer.close()
        // A clean stop snapshots what is new, so that the next start-up replays little.
        let (durable, covered) = core.withLockedValue { ($0.durableOperations, $0.snapshotPolicy.coveredOperations) }
        if durable > covered { _ = snapshotInForeground() }
        lock.withLock { $0 = nil }
        logger.info("storage closed")
    }
}
