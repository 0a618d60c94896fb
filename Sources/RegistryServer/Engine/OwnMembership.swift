import Logging
import RegistryCore
import Synchronization

/// This node's own entry in the cluster's members: it joins at its advertised address, and
/// records its removal once a peer says so. Each change is an operation of its own log, committed
/// like a client's write.
final class OwnMembership: Sendable {
    private let core: SharedCore
    private let pipeline: CommitPipeline
    private let nodeID: NodeID
    private let wallClock: @Sendable () -> UInt64
    private let logger: Logger
    /// Where peers reach this node, once it listens (see ``joinCluster()``).
    let advertisedAddress = Mutex<String?>(nil)

    init(core: SharedCore, pipeline: CommitPipeline, nodeID: NodeID, wallClock: @escaping @Sendable () -> UInt64, logger: Logger) {
        self.core = core
        self.pipeline = pipeline
        self.nodeID = nodeID
        self.wallClock = wallClock
        self.logger = logger
    }

    /// Records that this node is a member reached at its advertised address, unless its members
    /// already say so: when it starts with peers, or when a peer first connects to it.
    func joinCluster() {
        guard let address = advertisedAddress.withLock({ $0 }) else { return }
        join(advertising: address)
    }

    /// Records that this node is a member reached at `address`, unless its members already say
    /// so; `done` is called once that is durable (at once when nothing was to change).
    func join(advertising address: String, done: @escaping @Sendable () -> Void = {}) {
        // A removed node never joins again (removal is final): it would only log a join that no
        // peer accepts.
        change(address: address, removed: false, done: done) { own in own?.removed != true && own?.address != address }
    }

    /// A peer refused this node as removed from the cluster: records that, as the removal
    /// operation the cluster logged (a join, so applying it again changes nothing), so that the
    /// node refuses writes from now on, across restarts too. `done` runs once that is durable
    /// (at once when the node knew already); a caller that must not lose it to a crash waits.
    func learnedRemoval(done: @escaping @Sendable () -> Void = {}) {
        if change(address: "", removed: true, done: done, needed: { own in own?.removed != true }) {
            logger.error("a peer says this node was removed from the cluster: it refuses writes from now on")
        }
    }

    /// Logs a change of this node's own membership when `needed` says the members as they are
    /// lack it; `done` is called once it is durable (at once when nothing was to change).
    /// Returns whether it logged one.
    @discardableResult
    private func change(address: String, removed: Bool, done: @escaping @Sendable () -> Void = {}, needed: (Member?) -> Bool) -> Bool {
        let wall = wallClock()
        let logged = core.withLockedValue { core -> Bool in
            guard needed(core.node.registry.clusterMembers[nodeID]) else { return false }
            core.commits.recordOperations { operations in
                core.node.changeMembership(nodeID, address: address, removed: removed, wallMillis: wall, operations: &operations)
            }
            return true
        }
        guard logged else {
            done()
            return false
        }
        pipeline.enqueue(.own(done: done), waits: true)
        return true
    }
}
