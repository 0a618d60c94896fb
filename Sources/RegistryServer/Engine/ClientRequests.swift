import Platform
import RegistryCore
import RegistryWire

/// Turns a client's group of requests into answers, its one job. Each request is prepared and
/// its access checked off the lock, the group is held while a causal token names what the node
/// lacks (``CausalHolding``), each request is decided by ``NodeState`` under the engine's one
/// lock, and the group goes, with what it wrote, to the ``CommitPipeline``, which answers once
/// that is durable (and, for `--ack-replicas`, held by peers: ``ReplicaWaits``).
///
/// ``RegistryEngine`` builds it. Connections call it on their event loops; a held group is
/// submitted again through ``wakeCausalWaiters(_:)`` wherever the node learns more (a peer's
/// batch or snapshot) or the hold expires.
final class ClientRequests: Sendable {
    private let nodeID: NodeID
    private let limits: Limits
    /// Hashes presented identifiers (see ``IdentifierKey``); validation runs off the lock.
    private let identifierKey: IdentifierKey
    private let core: SharedCore
    private let pipeline: CommitPipeline
    private let causal: CausalHolding
    private let replicas: ReplicaWaits
    private let links: LinkedPeers
    private let statsReport: StatsReport
    private let wallClock: @Sendable () -> UInt64
    /// The clock and the timer of a held vendor rule change.
    private let catchUpTiming: CatchUpTiming

    init(
        nodeID: NodeID, limits: Limits, identifierKey: IdentifierKey, core: SharedCore, pipeline: CommitPipeline, causal: CausalHolding,
        replicas: ReplicaWaits, links: LinkedPeers, statsReport: StatsReport, wallClock: @escaping @Sendable () -> UInt64,
        catchUpTiming: CatchUpTiming = .system
    ) {
        self.catchUpTiming = catchUpTiming
        (self.nodeID, self.limits, self.identifierKey, self.core, self.pipeline) = (nodeID, limits, identifierKey, core, pipeline)
        (self.causal, self.replicas, self.links, self.statsReport, self.wallClock) = (causal, replicas, links, statsReport, wallClock)
    }

    /// The cluster's members, as this node's operations leave them.
    private var members: [NodeID: Member] {
        core.withLockedValue { $0.node.registry.clusterMembers }
    }

    /// A resolver of the vendor rules in force now, remembering `capacity` bundles. The rules can
    /// change (``VendorRuleHistory``): ``submit(_:resolver:access:deliver:causalDeadline:refusals:caughtUp:)``
    /// prepares again, under the lock, what was prepared with older rules, and renews the
    /// resolver.
    func resolver(capacity: Int) -> BundleResolver {
        core.withLockedValue { core in
            core.node.refreshRules()
            return BundleResolver(rules: core.node.rules, version: core.node.rulesVersion, capacity: capacity)
        }
    }

    /// Answers `frames` in order and calls `deliver` with the responses once they may be sent,
    /// validating bundles through the caller's `resolver`.
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
    /// (``ConnectionAccess/prepare(_:resolver:limits:identifierKey:)``): a snapshot request that its token allows leaves the
    /// group, to be answered on its own once the snapshot is written, seconds later.
    func submit(
        _ frames: [ClientFrame], resolver: inout BundleResolver, access: ConnectionAccess, deliver: @escaping RegistryEngine.Delivery,
        causalDeadline: UInt64? = nil, refusals: [(index: Int, error: WireError)] = [], caughtUp: Bool = false
    ) {
        var frames = frames
        var prepared = frames.map {
            access.prepare($0.body, resolver: &resolver, limits: limits, identifierKey: identifierKey)
        }
        // A held group's frames that were refused before it was held keep their refusals.
        for (index, error) in refusals { prepared[index] = .refused(error) }
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
        if !caughtUp, holdForCatchUp(frames, prepared: &prepared, access: access, deliver: deliver) { return }
        let replicasWanted = replicas.wanted(by: frames, prepared: &prepared) { links.count(members: members, own: nodeID) }
        links.refuseLiveRemovals(&prepared)
        links.holdMovesBackFromOldMembers(&prepared, members: { self.members }, own: nodeID)
        let requestIDs = frames.map(\.requestID)
        let submittedNanos = SystemClock.monotonicNanos()
        let wall = wallClock()
        let clonesAllowed = links.clonesAllowed(wallMillis: wall, members: { self.members }, own: nodeID)
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
                    request = access.prepare(frame.body, resolver: &renewed!, limits: limits, identifierKey: identifierKey)
                }
                // The claim buckets of the single registrations a few requests ahead, so that their
                // misses overlap the requests decided meanwhile (docs/performance.md, "Single
                // registrations prefetched").
                if index == 0 {
                    for ahead in prepared.indices.dropFirst().prefix(RegistryState.prefetchDistance - 1) {
                        prefetch(prepared[ahead], in: core.node)
                    }
                }
                if index + RegistryState.prefetchDistance < prepared.count {
                    prefetch(prepared[index + RegistryState.prefetchDistance], in: core.node)
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
        let waiter = RegistryEngine.Waiter(
            answers: RegistryEngine.Answers(requestIDs: requestIDs, decisions: decisions, token: token), deliver: deliver,
            replicas: ownThrough > 0 ? replicasWanted : 0, ownThrough: ownThrough, submittedNanos: submittedNanos)
        pipeline.enqueue(.client(waiter), waits: mustWait)
    }

    /// ``RegistryState/prefetch(for:)-(Registration)`` for a single registration; nothing for
    /// any other request (a batch warms its own buckets, ``RegistryState/warm(for:newDevices:)``).
    private func prefetch(_ request: NodeState.Prepared, in node: NodeState) {
        if case .register(.success(let registration)) = request { node.registry.prefetch(for: registration) }
    }

    /// Submits again held groups (taken out under the lock, and submitted after it): those a peer's
    /// batch or a snapshot let through, and those whose deadline passed.
    func wakeCausalWaiters(_ woken: [CausalWaits<RegistryEngine.CausalWaiter>.Released]) {
        for (waiter, deadline) in woken {
            var resolver = resolver(capacity: 0)
            submit(
                waiter.frames, resolver: &resolver, access: waiter.access, deliver: waiter.deliver, causalDeadline: deadline,
                refusals: waiter.refusals)
        }
    }

    /// Holds a group that changes the vendor rules, on a node with peers, until this node holds
    /// what each of them held when it arrived (``CatchUpBarrier``), and returns true;
    /// the group is then submitted again, its changes refused if the wait failed. Returns false,
    /// changing nothing, when the group has no such change or the node has caught up already,
    /// and refusing its changes at once when the node refuses writes.
    private func holdForCatchUp(
        _ frames: [ClientFrame], prepared: inout [NodeState.Prepared], access: ConnectionAccess, deliver: @escaping RegistryEngine.Delivery
    ) -> Bool {
        let changes = prepared.indices.filter { index in
            if case .vendorChange(.success) = prepared[index] { return true }
            return false
        }
        guard !changes.isEmpty else { return false }
        let wall = wallClock()
        let (members, writeRefusal) = core.withLockedValue { core in (core.node.registry.clusterMembers, core.node.writeRefusal(wallMillis: wall)) }
        // A node that refuses writes (removed, or its clock ahead) refuses the change with that
        // reason, as any write, rather than after a catch-up that could not help.
        if let writeRefusal {
            for index in changes { prepared[index] = .refused(writeRefusal) }
            return false
        }
        // A single node has nobody to catch up with; a node with peers, known as members or only
        // through its links, does.
        let peers = ClusterPeers.catchingUp(links: links.statuses, members: members, own: nodeID)
        guard !peers.nodes.isEmpty || !peers.addresses.isEmpty else { return false }
        var barrier = CatchUpBarrier(askedAtMillis: catchUpTiming.nowMillis(), catchUpWaitMillis: causal.timeoutMillis)
        links.askHoldings()
        switch ask(&barrier) {
        case .caughtUp: return false
        case .refused(let error):
            for index in changes { prepared[index] = .refused(error) }
            return false
        case .waiting:
            let waiter = CausalHolding.waiter(frames, prepared: prepared, access: access, deliver: deliver)
            awaitCatchUp(barrier, waiter: waiter, changes: changes)
            return true
        }
    }

    /// Asks `barrier` again every ``CatchUpBarrier/pollMillis`` until it decides, then submits
    /// the held group again.
    private func awaitCatchUp(_ barrier: CatchUpBarrier, waiter: RegistryEngine.CausalWaiter, changes: [Int]) {
        catchUpTiming.schedule {
            var barrier = barrier
            var refusals = waiter.refusals
            switch self.ask(&barrier) {
            case .waiting: return self.awaitCatchUp(barrier, waiter: waiter, changes: changes)
            case .caughtUp: break
            case .refused(let error): refusals += changes.map { ($0, error) }
            }
            var resolver = self.resolver(capacity: 0)
            self.submit(waiter.frames, resolver: &resolver, access: waiter.access, deliver: waiter.deliver, refusals: refusals, caughtUp: true)
        }
    }

    /// `barrier`'s outcome now: from the links, and the members and what this node holds (of
    /// every log, applied), read together.
    private func ask(_ barrier: inout CatchUpBarrier) -> CatchUpBarrier.Outcome {
        let (members, holds) = core.withLockedValue { ($0.node.registry.clusterMembers, $0.node.versionVector) }
        return barrier.evaluate(links: links.statuses, members: members, own: nodeID, holds: holds, nowMillis: catchUpTiming.nowMillis())
    }

    /// Answers a snapshot request (`requestID`) once the snapshot is taken.
    private func submitSnapshot(requestID: UInt64, deliver: @escaping RegistryEngine.Delivery) {
        pipeline.snapshotNow { outcome in
            let answers = RegistryEngine.Answers(requestIDs: [requestID], decisions: [.answer(ServerBody(snapshotOutcome: outcome))])
            self.pipeline.deliverCounted(RegistryEngine.Waiter(answers: answers, deliver: deliver))
        }
    }
}
