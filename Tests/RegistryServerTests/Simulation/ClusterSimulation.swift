import Dispatch
import Foundation
import Logging
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Synchronization
@testable import RegistryServer

/// A cluster in one process, driven by a seed: real engines (`RegistryEngine` over a
/// `SimulatedFileSystem` each), connected by a simulated network through the real protocol
/// cores (``PeerLinkStateMachine`` on the sending side, ``PeerSessionStateMachine`` on the
/// receiving side). Time is simulated; every step waits for the engine it drives, so a seed
/// replays exactly.
final class ClusterSimulation {
    /// A node's wall clock: simulated time plus the node's skew, which may jump backwards.
    final class Clock: Sendable {
        let millis = Mutex<UInt64>(0)
        var now: UInt64 { millis.withLock { $0 } }
    }

    /// What a node's engine sees of its links (``LinkedPeers``), as the simulation sets it before
    /// a step that reads it.
    final class LinkStatuses: Sendable {
        let statuses = Mutex<[PeerLinkStatus]>([])
    }

    /// A node's vendor change catch-up (``CatchUpTiming``), driven by the simulation: the polls
    /// the engine schedules wait here until the simulation runs them between two ticks of
    /// simulated time, and a request for the peers' holdings waits until it asks the links.
    final class CatchUpPolls: Sendable {
        private let polls = Mutex<[@Sendable () -> Void]>([])
        private let holdingsAsked = Mutex(false)

        func schedule(_ poll: @escaping @Sendable () -> Void) { polls.withLock { $0.append(poll) } }
        func askHoldings() { holdingsAsked.withLock { $0 = true } }
        var pending: Bool { polls.withLock { !$0.isEmpty } }
        /// The polls scheduled so far, taken out.
        func take() -> [@Sendable () -> Void] { polls.withLock { polls in defer { polls = [] }; return polls } }
        /// Whether the engine asked for the peers' holdings since the last call.
        func takeHoldingsAsked() -> Bool { holdingsAsked.withLock { asked in defer { asked = false }; return asked } }
    }

    struct Node {
        let name: NodeID
        var fs = SimulatedFileSystem()
        /// The disk as the engine sees it: ``fs``, which can be made to fail at a chosen change
        /// (``armDiskFailure(_:after:)``), as a process that dies in the middle of a write.
        var disk: CrashingFileSystem?
        var engine: RegistryEngine?
        let clock = Clock()
        let linkStatuses = LinkStatuses()
        /// The running engine's catch-up; a new one at each start, so that a dead engine's
        /// polls are never run.
        var catchUp = CatchUpPolls()
        /// Milliseconds ahead of (or behind) simulated time.
        var skew: Int64 = 0
        let instance: UInt64
    }

    struct Link {
        var machine: PeerLinkStateMachine
        var incarnation = 0
        var retryAt: UInt64?
        /// What the receiver held when last heard from, kept while it is unreachable (the
        /// retention floor, as ``PeerLink`` keeps it).
        var knownHolds = VersionVector()
        /// The snapshot file being sent.
        var snapshot: OpenedSnapshot?
        /// Whether it has streamed to its receiver (``PeerLinkStatus/provenNodeID``).
        var proven = false
    }

    /// An acknowledged registration: what it presented and the device it was told.
    struct Acknowledged {
        let vendor: Vendor
        let identifier: Identifier
        let device: DeviceID
    }

    /// An acknowledged bind or unbind: every node must hold a change like it in the end, of the
    /// millisecond its answer gave (the newest activity of a bind's account, the time an unbind
    /// unbound), so that a lost re-bind is not taken for an earlier bind of the same device.
    struct AcknowledgedBinding {
        let kind: BindingChange.Kind
        let account: String
        let device: DeviceID
        let millis: UInt64
    }

    /// An acknowledged forget: every node must hold the device gone in the end.
    struct AcknowledgedForget {
        let device: DeviceID
    }

    /// What happened, for the report and for checking that each fault was exercised.
    struct Counts: Equatable {
        /// Binds and unbinds answered as changing something, and those answered as changing nothing.
        var binds = 0, unbinds = 0, bindsRejected = 0, unbindsOfNothing = 0
        /// Binds and unbinds answered with an error, by code: only a device the node has not heard
        /// of yet, a removed member or a clock ahead may refuse one.
        var bindingErrors: [String: Int] = [:]
        /// Forgets answered as forgetting, and as gone already; and forgets refused, by code.
        var forgets = 0, forgetsOfGone = 0
        /// Registrations a node held back: it held a forget of a device it had not received.
        var heldForForgottenDevices = 0
        var forgetErrors: [String: Int] = [:]
        /// Removals the member asked refused, by code.
        var removalsRefused: [String: Int] = [:]
        /// Vendor rule changes answered as made, and refused, by code; of those made, the ones
        /// whose move joined vendors.
        var vendorChanges = 0, moves = 0
        /// Vendor changes asked again after an `unavailable` refusal (``retryRefusedVendorChange()``).
        var vendorRetries = 0
        var vendorErrors: [String: Int] = [:]
        /// Keychains restored onto a second phone (``keychainClone()``), and the clone operations
        /// the cluster logged in all.
        var cloneScenarios = 0, clonesLogged = 0
        var registrations = 0, siblingRaces = 0, splitRaces = 0, crashes = 0, partitions = 0, wipes = 0, skews = 0, removals = 0
        var restores = 0
        /// Crashes at a disk change inside a commit, a snapshot or an install; of those, inside
        /// the install of a peer's snapshot.
        var diskCrashes = 0, installCrashes = 0
        /// Members removed while they ran (with force), and their writes refused once they knew.
        var liveRemovals = 0, refusedAsRemoved = 0
        var batchesApplied = 0, refusals = 0, dropped = 0, snapshotsTaken = 0, snapshotsInstalled = 0
        /// Batches sent from the engine's memory (`RecentOperations`) and from its journal.
        var batchesFromMemory = 0, batchesFromJournal = 0
        /// Operations sent of another origin's log than the sender's (forwarded).
        var forwardedOperations = 0
    }

    static let maxClockSkewMillis: UInt64 = 5_000
    let seed: UInt64
    private(set) var nodes: [Node]
    private var links: [[Link?]]
    /// The receiver's session of each link, with the incarnation it belongs to.
    private var sessions: [[(incarnation: Int, machine: PeerSessionStateMachine)?]]
    /// The snapshot each receiver is taking in from each sender.
    private var intakes: [[IncomingSnapshot?]]
    /// Every operation read from a journal before a snapshot could trim it, by "log/sequence":
    /// the oracle needs them all.
    private var archive: [String: LoggedOperation] = [:]
    private(set) var network = SimulatedNetwork()
    private var random: SplitMix64
    /// The handshake's challenges, from a stream of their own so that they leave the faults'
    /// schedule as it was.
    private var challenges: SplitMix64
    /// Which vendor rule change a step asks for (``randomVendorChange()``), from a stream of its
    /// own too.
    private var vendorActions: SplitMix64
    private(set) var now: UInt64 = 1_000_000 {
        didSet { monotonic.millis.withLock { $0 = now } }
    }
    /// Simulated time as the nodes' monotonic clocks read it, which no skew steps: what their
    /// links (as ``PeerLink``) and vendor changes' catch-ups time by.
    private let monotonic = Clock()
    private(set) var acknowledged: [Acknowledged] = []
    private(set) var acknowledgedBindings: [AcknowledgedBinding] = []
    private(set) var acknowledgedForgets: [AcknowledgedForget] = []
    /// The vendor rules every node runs with: on odd seeds `com.sim` binds two devices an account
    /// and replaces past that; on even seeds it has the default policy (one device, reject).
    let vendorRules: VendorRules
    /// `com.sim`'s policy, as configured (the oracle takes it from here, not from the rules).
    let bindingPolicy: BindingPolicy
    /// Nodes removed from the cluster: down for good.
    private(set) var removed: Set<Int> = []
    /// Nodes whose next install of a peer's snapshot dies at one of its disk changes.
    private var crashInstall: Set<Int> = []
    /// Copies of nodes' disks (``backUp(_:)``), by node.
    private var backups: [Int: SimulatedFileSystem] = [:]
    private(set) var counts = Counts()
    /// Identifiers reused across registrations, so that claims meet and devices merge.
    private let keychains: [UUID128]
    private var nextIdentifier: UInt64 = 1

    init(seed: UInt64, nodeCount: Int = 3) throws {
        self.seed = seed
        random = SplitMix64(seed: seed)
        challenges = SplitMix64(seed: seed ^ 0xC4A1_1E46E)
        vendorActions = SplitMix64(seed: seed ^ 0x7E4D_0A57)
        var pool = SplitMix64(seed: seed ^ 0x5EED)
        keychains = (0..<6).map { _ in UUID128(high: pool.next() | 1, low: pool.next()) }
        bindingPolicy = seed % 2 == 1 ? try BindingPolicy(maxDevices: 2, pastLimit: .replace) : .default
        vendorRules =
            seed % 2 == 1
            ? try VendorRules(rules: [
                VendorRule(name: nil, prefixes: ["com.sim"], binding: bindingPolicy, clones: seed % 4 == 1 ? try ClonePolicy(action: .split) : .default)
            ]) : try VendorRules()
        nodes = (0..<nodeCount).map { index in
            Node(name: NodeID(trusted: "node-\(Character(UnicodeScalar(97 + index)!))"), instance: UInt64(index + 1))
        }
        links = Array(repeating: Array(repeating: nil, count: nodeCount), count: nodeCount)
        sessions = Array(repeating: Array(repeating: nil, count: nodeCount), count: nodeCount)
        intakes = Array(repeating: Array(repeating: nil, count: nodeCount), count: nodeCount)
        for index in nodes.indices { try open(index) }
    }

    // MARK: - Nodes

    private func open(_ index: Int) throws {
        nodes[index].clock.millis.withLock { $0 = wall(of: index) }
        monotonic.millis.withLock { $0 = now }
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = "/data"
        configuration.nodeID = nodes[index].name
        configuration.clusterID = "sim"
        // A short history, so that the watcher's cursor expires now and then (SimulatedWatcher).
        configuration.watchHistory = 40
        configuration.vendorRules = vendorRules
        configuration.snapshotEveryOperations = 0
        configuration.snapshotEverySeconds = 0
        // Snapshots come from the simulation's steps alone, never from a background timer.
        configuration.erasureWithinSeconds = 0
        // A vendor change's catch-up waits up to 2 s for the peers' answers, then this long for
        // what they named, in simulated time (randomVendorChange).
        configuration.causalTimeoutMillis = 500
        configuration.maxClockSkewMillis = Self.maxClockSkewMillis
        configuration.commitPacing = CommitPacing(delayMicros: 0, worthOperations: 1)
        // Small journal files: the simulated disk copies a whole file when a synced one changes,
        // and snapshots trim whole files.
        configuration.journalFileBytes = 1 << 10
        let clock = nodes[index].clock
        // Errors only, and only with SIM_LOG set: the refusals the seeds provoke (clock skew, above
        // all) and the disks made to fail would fill the log.
        var logger = ProcessInfo.processInfo.environment["SIM_LOG"] == nil ? Logger(label: "sim", factory: { _ in SwiftLogNoOpLogHandler() }) : Logger.quiet()
        logger.logLevel = .error
        let disk = CrashingFileSystem(nodes[index].fs, failingAfter: .max)
        nodes[index].disk = disk
        let catchUp = CatchUpPolls()
        nodes[index].catchUp = catchUp
        // The catch-up reads the clock the node's links date their batches by.
        let monotonic = self.monotonic
        let engine = try RegistryEngine(
            configuration: configuration, logger: logger, wallClock: { clock.now }, fs: disk, epochEntropy: random.next(),
            catchUpTiming: CatchUpTiming(nowMillis: { monotonic.now }, schedule: { catchUp.schedule($0) }))
        nodes[index].engine = engine
        let statuses = nodes[index].linkStatuses
        engine.links.attach({ statuses.statuses.withLock { $0 } }, askHoldings: { catchUp.askHoldings() })
        // A node of a cluster records that it is a member, as registryd does when it has peers.
        let address = "\(nodes[index].name):7400"
        _ = Self.wait { done in engine.membership.join(advertising: address) { done(true) } }
        for other in nodes.indices where other != index {
            links[index][other] = Link(
                machine: PeerLinkStateMachine(
                    ownNodeID: nodes[index].name, ownInstanceID: nodes[index].instance, proof: engine.peerIdentity.proof, window: 3,
                    forwardDelayMillis: 300,
                    answerTimeoutMillis: 2_000, installTimeoutMillis: 2_000, snapshotChunkBytes: 1 << 10,
                    backoff: Backoff(initialMillis: 50, maxMillis: 1_000)))
            carryOut(index, other, links[index][other]!.machine.start())
        }
    }

    private func wall(of index: Int) -> UInt64 {
        UInt64(max(1, Int64(now) + nodes[index].skew))
    }

    private func engine(_ index: Int) -> RegistryEngine? { nodes[index].engine }

    /// A node's process dies: its disk loses what was not synced (torn at random), its
    /// connections reset.
    func crash(_ index: Int) {
        guard nodes[index].engine != nil else { return }
        counts.crashes += 1
        nodes[index].engine = nil
        // What the dead engine still had queued changes nothing from here on.
        nodes[index].disk?.die()
        var tearing: SplitMix64? = SplitMix64(seed: random.next())
        nodes[index].fs.crash(tearing: &tearing)
        resetConnections(of: index)
    }

    /// Makes `index`'s disk refuse its `calls`-th next change, and every one after: the process
    /// dies there, and the simulation crashes the node once the engine met the failure
    /// (``crashNodesWhoseDiskFailed()``), tearing what was not synced.
    func armDiskFailure(_ index: Int, after calls: Int) {
        guard let disk = nodes[index].disk, nodes[index].engine != nil else { return }
        disk.failingAfter = disk.calls + calls
    }

    /// Lets `index`'s disk take every change again (an armed failure that no write reached).
    func disarmDiskFailure(_ index: Int) {
        nodes[index].disk?.failingAfter = .max
    }

    /// `index` dies at one of the disk changes of its next install of a peer's snapshot.
    func crashDuringNextInstall(_ index: Int) {
        crashInstall.insert(index)
    }

    /// Crashes every node whose disk refused a change; returns whether one did.
    @discardableResult
    private func crashNodesWhoseDiskFailed() -> Bool {
        var crashed = false
        for index in nodes.indices {
            guard let disk = nodes[index].disk, nodes[index].engine != nil, disk.calls > disk.failingAfter else { continue }
            counts.diskCrashes += 1
            crash(index)
            crashed = true
        }
        return crashed
    }

    func restart(_ index: Int) throws {
        guard nodes[index].engine == nil, !removed.contains(index) else { return }
        try open(index)
    }

    /// Copies what `index`'s disk holds durably, as a backup taken while it runs.
    func backUp(_ index: Int) {
        backups[index] = nodes[index].fs.durableCopy()
    }

    /// `index` dies and comes back on the copy ``backUp(_:)`` took: it has lost what it wrote
    /// since, which its peers hold, and must not reuse those operations' names.
    func restoreBackup(_ index: Int) throws {
        guard let backup = backups.removeValue(forKey: index), !removed.contains(index) else { return }
        counts.restores += 1
        crash(index)
        nodes[index].fs = backup.durableCopy()
        now += 10
        try open(index)
    }

    /// A node loses its disk for good and comes back empty, with a new epoch.
    func wipe(_ index: Int) throws {
        counts.wipes += 1
        crash(index)
        nodes[index].fs = SimulatedFileSystem()
        nodes[index].skew = 0
        now += 10
        try open(index)
    }

    /// An operator removes `index`, which is down for good, through node `via`.
    func remove(_ index: Int, via: Int) {
        guard nodes[via].engine != nil, via != index else { return }
        crash(index)
        // A refused removal (the member asked has a clock still ahead from an earlier skew, and
        // refuses writes) leaves the node a member, down, to be restarted like any other.
        guard askRemoval(of: index, via: via, force: false) else { return }
        removed.insert(index)
        counts.removals += 1
    }

    /// An operator removes `index` while it runs (`force`: it is reachable), through node `via`.
    /// It goes on running: it takes writes that never replicate until a peer refuses it as
    /// removed, and refuses every write from then on.
    func removeLive(_ index: Int, via: Int) {
        guard nodes[via].engine != nil, via != index, nodes[index].engine != nil, askRemoval(of: index, via: via, force: true) else { return }
        removed.insert(index)
        counts.removals += 1
        counts.liveRemovals += 1
    }

    /// Sends `registryctl cluster remove` for `index` to node `via`; whether it was removed.
    private func askRemoval(of index: Int, via: Int, force: Bool) -> Bool {
        guard let engine = nodes[via].engine else { return false }
        let frame = ClientFrame(requestID: 1, body: .removeMember(nodeID: nodes[index].name.value, force: force))
        let answer = Self.wait { done in engine.submit([frame]) { done($0.frames[0].body) } }
        if case .memberRemoved = answer { return true }
        if case .error(let error) = answer { counts.removalsRefused[error.code.name, default: 0] += 1 }
        return false
    }

    /// Writes a removed node acknowledged after it knew it was removed: none may be.
    private(set) var acknowledgedAsRemoved: [String] = []

    /// Whether `index` holds its own removal.
    func knowsItWasRemoved(_ index: Int) -> Bool {
        guard let engine = nodes[index].engine else { return false }
        return engine.members[nodes[index].name]?.removed == true
    }

    /// The nodes that were not removed.
    var members: [Int] { nodes.indices.filter { !removed.contains($0) } }

    private func resetConnections(of index: Int) {
        for other in nodes.indices where other != index {
            endSession(receiver: index, sender: other)
            endSession(receiver: other, sender: index)
            links[index][other]?.snapshot?.close()
            links[index][other] = nil
            if links[other][index] != nil {
                carryOut(other, index, links[other][index]!.machine.connectionLost("reset", random: &random))
            }
        }
    }

    /// The receiver's side of a connection is gone: so is the snapshot it was taking in.
    private func endSession(receiver: Int, sender: Int) {
        sessions[receiver][sender] = nil
        abandonIntake(receiver, sender)
        intakes[receiver][sender] = nil
    }

    /// `index` takes a snapshot, which trims its journal below what every peer is known to hold;
    /// what it held is archived first, for the oracle.
    func snapshot(_ index: Int) throws {
        guard let engine = engine(index) else { return }
        archiveOperations(of: engine)
        let outcome = engine.pipeline.snapshotInForeground()
        // A disk armed to fail may stop the snapshot: the node died taking it.
        if crashNodesWhoseDiskFailed() { return }
        _ = try outcome.get()
        counts.snapshotsTaken += 1
    }

    private func archiveOperations(of engine: RegistryEngine) {
        for (log, sequence) in engine.durableVector.logs where sequence > 0 {
            let from = engine.index.trimmedThrough(log) + 1
            guard from <= sequence, let reader = try? engine.logReader(for: log, from: from) else { continue }
            while reader.nextSequence <= sequence {
                guard let batch = try? reader.next(atMost: 1_000), !batch.isEmpty else { break }
                for operation in batch { archive["\(log)/\(operation.sequence)"] = operation }
            }
        }
    }

    /// Sets each node's retention floor to what every other member is known to hold, as
    /// ``Replication`` does.
    private func setRetentionFloors() {
        for index in members {
            guard let engine = engine(index) else { continue }
            let holds = members.filter { $0 != index }.map { links[index][$0]?.knownHolds ?? VersionVector() }
            engine.setRetentionFloor(VersionVector.floor(of: holds))
        }
    }

    // MARK: - Clients

    /// Registers at `index`; records the answer as acknowledged. Nil when the node is down.
    @discardableResult
    func register(at index: Int, bundle: String, identifiers: [PresentedIdentifier]) -> DeviceID? {
        guard let engine = engine(index) else { return nil }
        let knewRemoval = removed.contains(index) && knowsItWasRemoved(index)
        let frame = ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: bundle, identifiers: identifiers)))
        let answer = Self.wait { done in engine.submit([frame]) { done($0.frames[0].body) } }
        crashNodesWhoseDiskFailed()
        if removed.contains(index) {
            // A removed node's writes never replicate: not acknowledged to the cluster. Once it
            // knows, it refuses them.
            if knewRemoval {
                if case .error(let error) = answer, error.code == .notAMember {
                    counts.refusedAsRemoved += 1
                } else {
                    acknowledgedAsRemoved.append("\(nodes[index].name) answered \(answer) after it knew it was removed")
                }
            }
            return nil
        }
        if case .error(let error) = answer, error.code == .notCaughtUp { counts.heldForForgottenDevices += 1 }
        guard case .registerResult(let result) = answer, let device = try? DeviceID(parsing: result.deviceIDText.description) else { return nil }
        counts.registrations += 1
        let vendor = Vendor(trusted: result.vendor)
        for presented in identifiers {
            if let identifier = try? Identifier(presented) { acknowledged.append(Acknowledged(vendor: vendor, identifier: identifier, device: device)) }
        }
        return device
    }

    /// Binds one of a few accounts to a device a registration was told of, or (one in four)
    /// unbinds it from one it was bound to, through any running node (a removed one included);
    /// records what the answer acknowledged.
    func randomBinding() {
        // Removed members that still run are asked too: once they know, they must refuse.
        let alive = nodes.indices.filter { nodes[$0].engine != nil }
        guard let node = alive.randomElement(using: &random), let engine = engine(node),
            var device = acknowledged.randomElement(using: &random)?.device
        else { return }
        let account = "account-\(Int.random(in: 0..<4, using: &random))"
        let unbind = Int.random(in: 0..<4, using: &random) == 0
        // An unbind mostly names a device the account was bound to, so that most unbind something.
        if unbind, let bound = acknowledgedBindings.filter({ $0.account == account && $0.kind == .bind }).randomElement(using: &random) {
            device = bound.device
        }
        let request = BindingRequest(scope: .vendor("com.sim"), account: account, deviceID: device.description)
        let frame = ClientFrame(requestID: 1, body: unbind ? .unbind(request) : .bind(request))
        let knewRemoval = removed.contains(node) && knowsItWasRemoved(node)
        let answer = Self.wait { done in engine.submit([frame]) { done($0.frames[0].body) } }
        crashNodesWhoseDiskFailed()
        if removed.contains(node) {
            // As for registrations: never acknowledged to the cluster, and refused once it knows.
            if knewRemoval {
                if case .error(let error) = answer, error.code == .notAMember {
                    counts.refusedAsRemoved += 1
                } else {
                    acknowledgedAsRemoved.append("\(nodes[node].name) answered a bind with \(answer) after it knew it was removed")
                }
            }
            return
        }
        guard case .bindResult(let result) = answer else {
            if case .error(let error) = answer { counts.bindingErrors[error.code.name, default: 0] += 1 } else { counts.bindingErrors["\(answer)", default: 0] += 1 }
            return
        }
        switch result.outcome {
        case .bound, .alreadyBound:
            counts.binds += 1
            let millis = result.account?.bound.map(\.lastActiveMillis).max() ?? 0
            acknowledgedBindings.append(AcknowledgedBinding(kind: .bind, account: account, device: device, millis: millis))
        case .unbound:
            counts.unbinds += 1
            let millis = result.account?.unbound.map(\.atMillis).max() ?? 0
            acknowledgedBindings.append(AcknowledgedBinding(kind: .unbind, account: account, device: device, millis: millis))
        case .rejected: counts.bindsRejected += 1
        case .notBound, .unspecified: counts.unbindsOfNothing += 1
        }
    }

    /// Forgets a device a registration was told of, through a running member; records what the
    /// answer acknowledged.
    func randomForget() {
        let alive = members.filter { nodes[$0].engine != nil }
        guard let node = alive.randomElement(using: &random), let engine = engine(node),
            let device = acknowledged.randomElement(using: &random)?.device
        else { return }
        let frame = ClientFrame(requestID: 1, body: .forget(deviceID: device.description))
        let answer = Self.wait { done in engine.submit([frame]) { done($0.frames[0].body) } }
        crashNodesWhoseDiskFailed()
        switch answer {
        case .forgetResult(let result):
            if result.alreadyGone { counts.forgetsOfGone += 1 } else { counts.forgets += 1 }
            acknowledgedForgets.append(AcknowledgedForget(device: device))
        case .error(let error): counts.forgetErrors[error.code.name, default: 0] += 1
        default: counts.forgetErrors["\(answer)", default: 0] += 1
        }
    }

    /// Adds, changes or removes the rule of one of three vendors (`simN`, prefix `org.simN`, and
    /// sometimes `net.simN`) through a running member, asking for the move half the time. Some
    /// registrations present `org.simN` bundles (``randomRegistration(at:)``), so a change can move
    /// their devices between `org.simN` and `simN`; refusals are a rule that exists or does not,
    /// a move not asked for, and a change while the node does not stream to every other member
    /// or lacks what they held (its catch-up). A change refused as `unavailable` is asked again
    /// later, as an operator retries a retryable refusal (``retryRefusedVendorChange()``).
    func randomVendorChange() {
        let alive = members.filter { nodes[$0].engine != nil }
        guard let node = alive.randomElement(using: &random), let engine = engine(node) else { return }
        let number = Int.random(in: 0..<3, using: &random)
        let prefixes = ["org.sim\(number)"] + (Bool.random(using: &random) ? ["net.sim\(number)"] : [])
        let rule = VendorRuleMessage(name: "sim\(number)", prefixes: prefixes, maxDevices: UInt32.random(in: 1...3, using: &random))
        let move = Bool.random(using: &random)
        let actions: [VendorRequestMessage] = [.add(rule, move: move), .set(rule, move: move), .remove(name: "sim\(number)", move: move)]
        let anyAction = actions.randomElement(using: &random)!
        // Three times in four an action that fits the rules the node holds (add a vendor it has
        // no rule for, change or remove one it has), so that most changes, and their moves, are
        // decided rather than refused as not found.
        guard let before = vendorRules(of: engine) else { return }
        let fitting = before.rules.contains { $0.name == "sim\(number)" } ? Array(actions.dropFirst()) : [actions[0]]
        let request = vendorActions.next() % 4 == 0 ? anyAction : fitting.randomElement(using: &vendorActions)!
        if askVendorChange(request, at: node, rulesBefore: before) == .unavailable, refusedVendorChange == nil {
            refusedVendorChange = (request, Self.vendorChangeRetries)
        }
    }

    /// How many times a vendor change refused as `unavailable` is asked again.
    static let vendorChangeRetries = 20

    /// A vendor change refused as `unavailable` (a member not reached, or not caught up with yet),
    /// with the tries it has left: one at a time.
    private var refusedVendorChange: (request: VendorRequestMessage, triesLeft: Int)?

    /// Asks the change ``randomVendorChange()`` saw refused as `unavailable` again, through a
    /// running member, once every member runs and no link is cut (a member down or cut off
    /// refuses it for sure): after a restart or a heal, while links come back and catch up. Drops
    /// it once it is answered otherwise, or after ``vendorChangeRetries`` tries.
    func retryRefusedVendorChange() {
        guard let (request, triesLeft) = refusedVendorChange, network.cut.isEmpty, members.allSatisfy({ nodes[$0].engine != nil }) else {
            return
        }
        let node = members[Int(vendorActions.next() % UInt64(members.count))]
        guard let engine = engine(node), let before = vendorRules(of: engine) else { return }
        counts.vendorRetries += 1
        let refusedAgain = askVendorChange(request, at: node, rulesBefore: before) == .unavailable && triesLeft > 1
        refusedVendorChange = refusedAgain ? (request, triesLeft - 1) : nil
    }

    /// The vendor rules `engine` holds, or nil when it does not list them.
    private func vendorRules(of engine: RegistryEngine) -> VendorRulesMessage? {
        let listed = Self.wait { done in engine.submit([ClientFrame(requestID: 1, body: .vendor(.list))]) { done($0.frames[0].body) } }
        guard case .vendorRules(let rules) = listed else { return nil }
        return rules
    }

    /// How a vendor change was answered, as far as ``randomVendorChange()`` retries it.
    private enum VendorChangeOutcome { case decided, unavailable, other }

    /// Asks `node` for `request`, running simulated time through its catch-up, counts the answer,
    /// and checks that a decided change was decided holding what every other running member held
    /// as it arrived.
    private func askVendorChange(_ request: VendorRequestMessage, at node: Int, rulesBefore before: VendorRulesMessage) -> VendorChangeOutcome {
        guard let engine = engine(node) else { return .other }
        let frame = ClientFrame(requestID: 1, body: .vendor(request))
        // What every other running member holds as the change arrives: decided, the change must
        // have been decided on a node that held it all (CatchUpBarrier), so that its move took in
        // every device registered before it.
        let heldElsewhere = members.filter { $0 != node }.compactMap { nodes[$0].engine?.durableVector }
            .reduce(VersionVector()) { $0.joined(with: $1) }
        // The links' statuses, for the catch-up and the check that every member can carry out a
        // move; for this step only (every other step sees none, as before the check existed).
        defer { nodes[node].linkStatuses.statuses.withLock { $0 = [] } }
        publishLinkStatuses(of: node)
        let answered = Mutex<ServerBody?>(nil)
        let done = DispatchSemaphore(value: 0)
        engine.submit([frame]) { answers in
            answered.withLock { $0 = answers.frames[0].body }
            done.signal()
        }
        guard let answer = awaitCatchUp(of: node, engine: engine, done: done).flatMap({ answered.withLock { $0 } }) else {
            counts.vendorErrors["no answer: the node died", default: 0] += 1
            return .other
        }
        crashNodesWhoseDiskFailed()
        switch answer {
        case .vendorRules(let after):
            counts.vendorChanges += 1
            if !after.aliases.elementsEqual(before.aliases, by: { $0 == $1 }) { counts.moves += 1 }
            // Nothing else ran since the change was decided: the node holds now what it held then.
            let held = engine.core.withLockedValue { $0.node.versionVector }
            if !held.covers(heldElsewhere) {
                decidedBehind.append(
                    "\(nodes[node].name) decided \(request) holding \(held), lacking \(heldElsewhere.operationsAhead(of: held)) operations its peers held")
            }
            return .decided
        case .error(let error):
            counts.vendorErrors[error.code.name, default: 0] += 1
            return error.code == .unavailable ? .unavailable : .other
        default:
            counts.vendorErrors["\(answer)", default: 0] += 1
            return .other
        }
    }

    /// Vendor changes decided on a node that lacked what another member held as they arrived:
    /// none may be.
    private(set) var decidedBehind: [String] = []

    /// Runs simulated time while `node`'s vendor change waits for its catch-up, as the node's
    /// timer and links would: the links send the probes it asks for, the network delivers, and
    /// its polls run between two ticks. Returns once `done` is signalled (the answer, which a
    /// decided change sends after its commit), or nil when the node died meanwhile.
    private func awaitCatchUp(of node: Int, engine: RegistryEngine, done: DispatchSemaphore) -> Void? {
        let catchUp = nodes[node].catchUp
        var waited: UInt64 = 0
        // No poll waiting: the change is decided (or refused), and its answer is on its way.
        while catchUp.pending {
            if catchUp.takeHoldingsAsked() {
                for other in nodes.indices where links[node][other] != nil { links[node][other]!.machine.wantProbe() }
            }
            advance(by: UInt64(CatchUpBarrier.pollMillis))
            waited += UInt64(CatchUpBarrier.pollMillis)
            guard nodes[node].engine === engine else { return nil }
            precondition(waited < 60_000, "seed \(seed): a vendor change waited for its catch-up for a minute")
            publishLinkStatuses(of: node)
            for poll in catchUp.take() { poll() }
        }
        done.wait()
        return ()
    }

    /// Sets what `node`'s engine sees of its links as ``PeerLink`` publishes it: the state, what
    /// the peer was last heard to hold, and when the batch its latest answer acknowledged was sent.
    private func publishLinkStatuses(of node: Int) {
        let statuses = nodes.indices.compactMap { other -> PeerLinkStatus? in
            guard let link = links[node][other] else { return nil }
            var status = PeerLinkStatus(address: "\(nodes[other].name):7400")
            status.nodeID = nodes[other].name.value
            status.provenNodeID = link.proven ? nodes[other].name.value : ""
            // Every node lists the others in its --peers.
            status.configured = true
            status.state = link.machine.statusName
            status.peerVersion = .current
            status.answeredAtMillis = link.machine.cursor?.answeredSentMillis ?? 0
            status.peerHolds = (link.machine.cursor?.receiverHolds ?? link.knownHolds).positions
            return status
        }
        nodes[node].linkStatuses.statuses.withLock { $0 = statuses }
    }

    private func freshUUID() -> UUID128 {
        nextIdentifier += 1
        return UUID128(high: seed << 32 | nextIdentifier, low: random.next() | 1)
    }

    /// A registration that may meet earlier ones: a pooled keychain UUID, a fresh or pooled IDFV,
    /// or (before the first unlock, iOS gives no IDFV) a pooled keychain UUID alone.
    func randomRegistration(at chosen: Int? = nil) {
        let alive = nodes.indices.filter { nodes[$0].engine != nil }
        guard let node = chosen ?? alive.randomElement(using: &random), nodes[node].engine != nil else { return }
        var identifiers = [PresentedIdentifier]()
        if Int.random(in: 0..<3, using: &random) > 0 {
            identifiers.append(PresentedIdentifier(rawKind: 1, text: keychains.randomElement(using: &random)!.text))
        }
        if identifiers.isEmpty || Int.random(in: 0..<5, using: &random) > 0 {
            let idfv = Int.random(in: 0..<4, using: &random) == 0 ? keychains.randomElement(using: &random)! : freshUUID()
            identifiers.append(PresentedIdentifier(rawKind: 2, text: idfv.text))
        }
        // One in five of an app whose vendor rule changes move (``randomVendorChange()``).
        let bundle =
            Int.random(in: 0..<5, using: &random) == 0
            ? "org.sim\(Int.random(in: 0..<3, using: &random)).app" : "com.sim.app\(Int.random(in: 0..<3, using: &random))"
        register(at: node, bundle: bundle, identifiers: identifiers)
    }

    /// Two sibling apps of a new phone register through two nodes before either hears of the
    /// other: both must be told one ID. They present the IDFV, or (before the first unlock) only
    /// the shared keychain UUID.
    func siblingRace() {
        let alive = nodes.indices.filter { nodes[$0].engine != nil }.shuffled(using: &random)
        guard alive.count >= 2 else { return }
        let shared: PresentedIdentifier
        var second: [PresentedIdentifier]
        if Int.random(in: 0..<3, using: &random) == 0 {
            shared = PresentedIdentifier(rawKind: 1, text: freshUUID().text)
            second = [shared]
        } else {
            shared = PresentedIdentifier(rawKind: 2, text: freshUUID().text)
            second = [shared]
            if Bool.random(using: &random) { second.append(PresentedIdentifier(rawKind: 1, text: freshUUID().text)) }
        }
        let first = register(at: alive[0], bundle: "com.sim.app1", identifiers: [shared])
        let other = register(at: alive[1], bundle: "com.sim.app2", identifiers: second)
        guard let first, let other else { return }
        counts.siblingRaces += 1
        if first != other { counts.splitRaces += 1 }
    }

    /// A backup restored onto a second phone, both in use: the first phone registers with its
    /// keychain UUID and IDFV, the second with the same keychain UUID and its own IDFV, then the
    /// first again, each through any running node. Whether a node sees the clone depends on what
    /// it holds when the first phone comes back; every node must end with the same marks.
    func keychainClone() {
        defer { counts.cloneScenarios += 1 }
        let alive = nodes.indices.filter { nodes[$0].engine != nil }
        guard !alive.isEmpty else { return }
        let keychain = PresentedIdentifier(rawKind: 1, text: freshUUID().text)
        let (first, second) = (PresentedIdentifier(rawKind: 2, text: freshUUID().text), PresentedIdentifier(rawKind: 2, text: freshUUID().text))
        register(at: alive.randomElement(using: &random)!, bundle: "com.sim.app1", identifiers: [keychain, first])
        advance(by: UInt64.random(in: 1...40, using: &random))
        register(at: alive.randomElement(using: &random)!, bundle: "com.sim.app2", identifiers: [keychain, second])
        advance(by: UInt64.random(in: 1...40, using: &random))
        register(at: alive.randomElement(using: &random)!, bundle: "com.sim.app1", identifiers: [keychain, first])
    }

    /// Counts the clone operations the cluster logged, once it is quiet.
    func countClones() throws {
        counts.clonesLogged = try allOperations().filter { if case .clone = $0.operation { true } else { false } }.count
    }

    // MARK: - Faults

    /// Cuts `index` off from every other node (both ways), dropping what is in flight.
    func isolate(_ index: Int) {
        counts.partitions += 1
        for other in nodes.indices where other != index {
            network.cut.insert([index, other])
            network.cut.insert([other, index])
        }
    }

    /// Cuts the link between `one` and `other` alone (both ways), dropping what is in flight on it.
    func cutLink(_ one: Int, _ other: Int) {
        counts.partitions += 1
        network.cut.insert([one, other])
        network.cut.insert([other, one])
    }

    /// Makes messages from `from` to `to` take `millis` longer (0 for as before). Messages of one
    /// connection still arrive in the order sent, as long as no extra random delay is set and the
    /// slowdown does not shrink while messages are in flight.
    func slowLink(from: Int, to: Int, byMillis millis: UInt64) {
        network.slow[[from, to]] = millis == 0 ? nil : millis
    }

    func healAll() {
        network.cut = []
    }

    func setSkew(_ index: Int, _ millis: Int64) {
        counts.skews += 1
        nodes[index].skew = millis
    }

    func setFaults(_ faults: SimulatedNetwork.Faults) {
        network.faults = faults
    }

    // MARK: - Time

    /// Advances simulated time by `millis`: links tick and send, and the network delivers.
    func advance(by millis: UInt64) {
        now += millis
        for index in nodes.indices { nodes[index].clock.millis.withLock { $0 = wall(of: index) } }
        closeConnectionsOfRemovedNodes()
        for sender in nodes.indices where nodes[sender].engine != nil {
            for receiver in nodes.indices where receiver != sender {
                guard let link = links[sender][receiver] else { continue }
                if let retry = link.retryAt, retry <= now {
                    links[sender][receiver]!.retryAt = nil
                    carryOut(sender, receiver, links[sender][receiver]!.machine.retryDue())
                }
                guard links[sender][receiver] != nil else { continue }
                carryOut(sender, receiver, links[sender][receiver]!.machine.tick(nowMillis: now, random: &random))
                pump(sender, receiver)
            }
        }
        for message in network.due(by: now) {
            deliver(message)
            crashNodesWhoseDiskFailed()
        }
        setRetentionFloors()
    }

    /// As ``Replication`` and ``PeerConnectionHandler`` do once a member holds a removal: it drops
    /// its link to the removed node, and closes the sessions that node opened to it (which then
    /// dials again, and is refused as removed).
    private func closeConnectionsOfRemovedNodes() {
        for member in members {
            guard let engine = nodes[member].engine else { continue }
            for gone in removed where engine.members[nodes[gone].name]?.removed == true {
                if links[member][gone] != nil {
                    links[member][gone]?.snapshot?.close()
                    links[member][gone] = nil
                }
                // A session opened since refuses the node's hello itself.
                if let session = sessions[member][gone], !session.machine.removed.contains(nodes[gone].name) {
                    endSession(receiver: member, sender: gone)
                    if links[gone][member] != nil {
                        carryOut(gone, member, links[gone][member]!.machine.connectionLost("closed: removed", random: &random))
                    }
                }
            }
        }
    }

    /// Whether every live node holds the same, and nothing is in flight.
    var isQuiet: Bool {
        let vectors = members.compactMap { nodes[$0].engine?.durableVector }
        // A removed node that still runs has been told.
        let told = removed.allSatisfy { nodes[$0].engine == nil || knowsItWasRemoved($0) }
        return told && network.isEmpty(among: Set(members)) && vectors.count == members.count && Set(vectors.map(\.description)).count == 1
    }

    // MARK: - The protocol shells

    private func carryOut(_ sender: Int, _ receiver: Int, _ action: PeerLinkStateMachine.Action) {
        guard links[sender][receiver] != nil, let engine = nodes[sender].engine else { return }
        switch action {
        case .connect:
            let reachable = nodes[receiver].engine != nil && network.reaches(sender, receiver) && network.reaches(receiver, sender)
            guard reachable else {
                return carryOut(sender, receiver, links[sender][receiver]!.machine.connectionLost("unreachable", random: &random))
            }
            links[sender][receiver]!.incarnation += 1
            let incarnation = links[sender][receiver]!.incarnation
            let receiverEngine = nodes[receiver].engine!
            sessions[receiver][sender] = (
                incarnation,
                PeerSessionStateMachine(
                    identity: receiverEngine.peerIdentity, challenge: challenges.next() | 1, maxBatchOperations: PeerLink.maxBatchOperations,
                    removed: Set(receiverEngine.members.filter(\.value.removed).keys))
            )
            carryOut(sender, receiver, links[sender][receiver]!.machine.connected(nowMillis: now))
        case .sendClientHello:
            let accepted = HelloAccepted(
                version: .current, nodeID: nodes[receiver].name.value, clusterID: "sim", serverVersion: "sim", limits: .default,
                instanceID: nodes[receiver].instance, challenge: sessions[receiver][sender]?.1.challenge ?? 0)
            carryOut(
                sender, receiver,
                links[sender][receiver]!.machine.received(
                    ServerFrame(requestID: 0, body: .helloAccepted(accepted)), challenge: challenges.next() | 1, random: &random))
        case .sendPeerHello(let challenge, let ownChallenge):
            send(
                sender, receiver, .toReceiver,
                .hello(engine.peerIdentity.hello(holding: engine.durableVector, challenge: challenge, ownChallenge: ownChallenge)))
        case .stream:
            pump(sender, receiver)
        case .closeAndRetry(let delay, _, let refusal, let proven):
            if refusal != nil { counts.refusals += 1 }
            // As ``PeerLink`` does: a peer that proved itself and refuses this node as removed tells
            // it so. The simulation waits for it to be durable: a crash at the next step would
            // otherwise keep or lose it by how far the writer's queue had got, and a seed would not
            // replay.
            if proven, refusal?.code == .nodeRemoved { _ = Self.wait { done in engine.membership.learnedRemoval { done(true) } } }
            // As PeerLink does: a snapshot refused for good is followed by a newer one.
            if proven, let refusal, refusal.code == .snapshotRefused, !refusal.retryable { try? snapshot(sender) }
            links[sender][receiver]!.incarnation += 1
            links[sender][receiver]!.retryAt = now + delay
            links[sender][receiver]!.snapshot?.close()
            links[sender][receiver]!.snapshot = nil
            endSession(receiver: receiver, sender: sender)
        case .ownAddress, .none:
            break
        }
    }

    private func pump(_ sender: Int, _ receiver: Int) {
        guard let engine = engine(sender), var link = links[sender][receiver], case .streaming = link.machine.state else { return }
        link.proven = true
        links[sender][receiver] = link
        defer {
            if let holds = links[sender][receiver]?.machine.cursor?.receiverHolds { links[sender][receiver]?.knownHolds = holds }
        }
        let local = engine.durableVector
        let clock = now
        if link.machine.transfer != nil { return sendSnapshotChunks(sender, receiver) }
        if let file = link.snapshot {
            file.close()
            link.snapshot = nil
            links[sender][receiver] = link
        }
        if let probe = link.machine.probeIfDue(nowMillis: clock) {
            links[sender][receiver] = link
            send(sender, receiver, .toReceiver, .batch(OperationBatch(batchID: probe, operations: [])))
        }
        while let run = link.machine.nextRun(local: local, nowMillis: clock) {
            // From the engine's memory while it keeps the run (the real `RecentOperations`, as
            // `PeerLink` reads it), otherwise from the journal.
            let batch: [PeerOperation]
            if let kept = engine.recent.read(run.log, from: run.from, atMost: 40) {
                batch = kept.prefix { $0.sequence <= run.through }.map(PeerOperation.init)
                counts.batchesFromMemory += 1
            } else {
                let records: [LogRecord]
                do {
                    records = try engine.logReader(for: run.log, from: run.from).nextRecords(atMost: 40)
                } catch .trimmed {
                    // The receiver lacks what the journal trimmed: the newest snapshot goes instead.
                    guard let newest = try? engine.snapshots.openNewest(),
                        link.machine.startSnapshot(totalBytes: UInt64(newest.bytes), nowMillis: clock) != nil
                    else { break }
                    link.snapshot = newest
                    links[sender][receiver] = link
                    return sendSnapshotChunks(sender, receiver)
                } catch {
                    break
                }
                batch = records.prefix(40).prefix { $0.sequence <= run.through }.map(PeerOperation.init)
                if !batch.isEmpty { counts.batchesFromJournal += 1 }
            }
            guard let last = batch.last,
                let batchID = link.machine.sending(
                    log: run.log, through: last.sequence, operations: batch.count, oldestMillis: batch[0].hlc >> 16, nowMillis: clock)
            else { break }
            if run.log.origin != nodes[sender].name { counts.forwardedOperations += batch.count }
            links[sender][receiver] = link
            send(sender, receiver, .toReceiver, .batch(OperationBatch(batchID: batchID, operations: batch)))
            link = links[sender][receiver]!
        }
        links[sender][receiver] = link
    }

    private func sendSnapshotChunks(_ sender: Int, _ receiver: Int) {
        guard var link = links[sender][receiver], let file = link.snapshot, let total = link.machine.transfer?.totalBytes else { return }
        while let next = link.machine.nextSnapshotChunk(nowMillis: now) {
            guard let data = try? file.read(at: Int(next.offset), count: next.count) else {
                links[sender][receiver] = link
                return carryOut(sender, receiver, links[sender][receiver]!.machine.failed("cannot read the snapshot", random: &random))
            }
            links[sender][receiver] = link
            send(sender, receiver, .toReceiver, .snapshotChunk(SnapshotChunk(transferID: next.transferID, offset: next.offset, totalBytes: total, data: data)))
            link = links[sender][receiver]!
        }
        links[sender][receiver] = link
    }

    private func send(_ sender: Int, _ receiver: Int, _ direction: SimulatedNetwork.Direction, _ frame: PeerFrame) {
        guard let incarnation = links[sender][receiver]?.incarnation else { return }
        network.send(
            sender: sender, receiver: receiver, incarnation: incarnation, direction: direction, frame: frame, now: now, random: &random)
    }

    private func deliver(_ message: SimulatedNetwork.Message) {
        let (sender, receiver) = (message.sender, message.receiver)
        guard links[sender][receiver]?.incarnation == message.incarnation else {
            counts.dropped += 1
            return
        }
        switch message.direction {
        case .toReceiver:
            guard let engine = engine(receiver), var session = sessions[receiver][sender], session.incarnation == message.incarnation
            else { return }
            let action = session.machine.received(message.frame)
            sessions[receiver][sender] = session
            switch action {
            case .welcome(_, let challenge):
                send(sender, receiver, .toSender, .welcome(welcome(from: engine, signing: challenge)))
            case .welcomeThenRefuse(_, let challenge, let refusal):
                send(sender, receiver, .toSender, .welcome(welcome(from: engine, signing: challenge)))
                sessions[receiver][sender] = nil
                send(sender, receiver, .toSender, .refusal(refusal))
            case .close:
                sessions[receiver][sender] = nil
            case .apply(let batchID, let operations):
                let result = Self.wait { done in engine.submitRemote(operations) { done($0) } }
                switch result {
                case .success(let held):
                    counts.batchesApplied += 1
                    send(sender, receiver, .toSender, .ack(BatchAck(batchID: batchID, held: held)))
                case .failure(let error):
                    _ = session.machine.refused(error)
                    sessions[receiver][sender] = nil
                    send(sender, receiver, .toSender, .refusal(error))
                }
            case .storeChunk(let chunk, let starts, let last):
                storeChunk(chunk, starts: starts, last: last, sender: sender, receiver: receiver, engine: engine)
            case .refuse(let error):
                sessions[receiver][sender] = nil
                send(sender, receiver, .toSender, .refusal(error))
            case .ignore:
                break
            }
        case .toSender:
            guard engine(sender) != nil, links[sender][receiver] != nil else { return }
            carryOut(
                sender, receiver, links[sender][receiver]!.machine.received(message.frame, nowMillis: now, random: &random))
        }
    }

    /// `engine`'s welcome to a peer, as ``PeerConnectionHandler`` sends it.
    private func welcome(from engine: RegistryEngine, signing challenge: UInt64) -> PeerWelcome {
        engine.peerIdentity.welcome(holding: engine.durableVector, challenge: challenge, maxBatchOperations: PeerLink.maxBatchOperations)
    }

    /// Gives up on the snapshot `receiver` takes in from `sender`, if any, and waits until the
    /// intake is free: a transfer that starts at the next step must find it so on every run.
    private func abandonIntake(_ receiver: Int, _ sender: Int) {
        guard let intake = intakes[receiver][sender] else { return }
        _ = Self.wait { done in intake.abandon { done(true) } }
    }

    /// The receiving side of a snapshot transfer, through the real intake (``IncomingSnapshot``).
    private func storeChunk(_ chunk: SnapshotChunk, starts: Bool, last: Bool, sender: Int, receiver: Int, engine: RegistryEngine) {
        if starts {
            abandonIntake(receiver, sender)
            intakes[receiver][sender] = IncomingSnapshot.begin(engine: engine)
        }
        guard let intake = intakes[receiver][sender] else {
            let busy = RegistryEngine.snapshotRefused("another peer's snapshot is being installed", retryable: true)
            endSession(receiver: receiver, sender: sender)
            return send(sender, receiver, .toSender, .refusal(busy))
        }
        let received = chunk.offset + UInt64(chunk.data.count)
        var outcome: Result<SnapshotAck, WireError>
        if let failure = Self.wait({ done in intake.write(chunk) { done($0) } }) {
            outcome = .failure(failure)
        } else {
            outcome = .success(SnapshotAck(transferID: chunk.transferID, receivedBytes: received))
        }
        if case .success(let ack) = outcome {
            send(sender, receiver, .toSender, .snapshotAck(ack))
            guard last else { return }
            intakes[receiver][sender] = nil
            // Chosen to die inside this install: at one of its disk changes (the renames, the
            // new journal file, the syncs).
            let dies = crashInstall.remove(receiver) != nil
            if dies { armDiskFailure(receiver, after: Int.random(in: 0..<4, using: &random)) }
            outcome = Self.wait { done in intake.finish { done($0) } }.map {
                SnapshotAck(transferID: chunk.transferID, receivedBytes: received, installed: true, held: $0.positions)
            }
            if dies {
                if let disk = nodes[receiver].disk, disk.calls > disk.failingAfter {
                    counts.installCrashes += 1
                    return
                }
                disarmDiskFailure(receiver)
            }
        }
        switch outcome {
        case .success(let ack):
            counts.snapshotsInstalled += 1
            send(sender, receiver, .toSender, .snapshotAck(ack))
        case .failure(let error):
            endSession(receiver: receiver, sender: sender)
            send(sender, receiver, .toSender, .refusal(error))
        }
    }

    // MARK: - Checking

    /// What each node holds (its vector and state digest) and how many disk changes it made, for
    /// `SIM_STEPS`: a seed's runs must repeat it after every step.
    var stepTrace: String {
        nodes.map { node in
            guard let engine = node.engine else { return "\(node.name) down" }
            let stats = engine.stats()
            let held = stats.versionVector.map { "\($0.origin)/\($0.epoch)/\($0.sequence)" }.sorted().joined(separator: " ")
            return "\(node.name) [\(held)] digest \(stats.stateDigest), \(node.disk?.calls ?? 0) disk changes"
        }.joined(separator: "; ")
    }

    /// Each link's state, for a failure's report.
    var linkReport: String {
        var lines = [String]()
        for sender in nodes.indices {
            for receiver in nodes.indices where receiver != sender {
                guard let link = links[sender][receiver] else {
                    lines.append("\(sender)->\(receiver): none")
                    continue
                }
                lines.append(
                    "\(sender)->\(receiver): \(link.machine.state) inc \(link.incarnation) retry \(String(describing: link.retryAt)) inflight \(link.machine.cursor?.inFlight.count ?? -1) last \(link.machine.lastFailure ?? "")")
            }
        }
        return lines.joined(separator: "; ") + " now \(now)"
    }

    /// Every operation the members hold, read back through the log API, with those archived
    /// before snapshots trimmed them; not what a member removed while it ran wrote afterwards,
    /// which never reached them.
    func allOperations() throws -> [LoggedOperation] {
        for node in nodes {
            if let engine = node.engine { archiveOperations(of: engine) }
        }
        guard let held = members.lazy.compactMap({ self.nodes[$0].engine?.durableVector }).first else { return Array(archive.values) }
        return archive.values.filter { held[LogID(origin: $0.origin, epoch: $0.epoch)] >= $0.sequence }
    }

    /// Runs `body`, which calls back once, and waits for it.
    static func wait<Value: Sendable>(_ body: (@escaping @Sendable (Value) -> Void) -> Void) -> Value {
        let box = Mutex<Value?>(nil)
        let done = DispatchSemaphore(value: 0)
        body { value in
            box.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return box.withLock { $0! }
    }
}
