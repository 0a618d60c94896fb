import RegistryCore
import RegistryStorage
import RegistryWire

/// Builds the node's statistics (``StatsMessage``) from the engine's state and the counters,
/// storage and links around it.
struct StatsReport: Sendable {
    let nodeID: NodeID
    let clusterID: String
    let startedAt: UInt64
    let counters: ServerCounters
    let index: JournalIndex
    let snapshots: Snapshotter
    let links: LinkedPeers
    let wallClock: @Sendable () -> UInt64

    /// The stats as of `core` (read under the engine's lock).
    func message(_ core: borrowing EngineCore) -> StatsMessage {
        let now = wallClock()
        var message = StatsMessage()
        message.nodeID = nodeID.value
        message.clusterID = clusterID
        message.serverVersion = RegistryEngine.serverVersion
        message.uptimeMillis = now &- startedAt
        message.deviceCount = UInt64(core.node.registry.deviceCount)
        message.aliasCount = UInt64(core.node.registry.aliasCount)
        message.claimCount = UInt64(core.node.registry.claimCount)
        message.requestsServed = counters.requestsServed
        message.errors = counters.errorCounts
        message.logOperations = core.durable.operations
        message.logEpoch = core.node.epoch
        message.logSequence = core.node.nextSequence - 1
        message.connections = UInt64(counters.connections)
        message.logCommits = core.durable.commits
        message.commitLatency = core.durable.commitLatency
        message.journalBytes = UInt64(index.durableBytes)
        message.journalFiles = UInt64(index.files.count)
        let (last, age) = snapshots.last
        message.snapshotOperations = core.snapshotPolicy.coveredOperations
        message.snapshotAgeMillis = age / 1_000_000
        message.snapshotBytes = UInt64(last?.bytes ?? 0)
        message.versionVector = core.node.versionVector.positions
        message.stateDigest = core.node.registry.digest
        message.writeRefusal = core.node.writeRefusal(wallMillis: now)?.message ?? ""
        message.members = core.node.registry.clusterMembers.sorted { $0.key < $1.key }.map {
            ClusterMemberReport(nodeID: $0.key.value, address: $0.value.address, removed: $0.value.removed)
        }
        message.peers = links.statuses.map { link in
            PeerLinkReport(
                address: link.address, nodeID: link.nodeID, state: link.state, backlogOperations: link.backlogOperations,
                inFlightBatches: link.inFlightBatches,
                lagMillis: link.oldestUnacknowledgedMillis == 0 ? 0 : now &- min(now, link.oldestUnacknowledgedMillis),
                peerHolds: link.peerHolds, reconnects: link.reconnects, lastError: link.lastError, sentOperations: link.sentOperations)
        }
        return message
    }
}
