import Dispatch
import Logging
import NIOCore
import RegistryCore
import Synchronization

/// This node's side of the cluster: one ``PeerLink`` per `--peers` address, each streaming to
/// its peer what the peer lacks. Receiving needs nothing here: any node accepts peer
/// connections (``PeerConnectionHandler``).
///
/// It also sets the journal's retention floor: a journal file is trimmed only once every peer
/// holds what it holds (as the peers last said; one never heard from holds nothing), so that a
/// peer that was down catches up from the log.
public final class Replication: Sendable {
    private let links: [PeerLink]
    private let engine: RegistryEngine
    private let stopped = Mutex(false)

    public init(engine: RegistryEngine, peers: [PeerAddress], group: any EventLoopGroup, logger: Logger) {
        let links = peers.map { PeerLink(address: $0, engine: engine, group: group, logger: logger) }
        self.links = links
        self.engine = engine
        engine.observeCommits { for link in links { link.commitHappened() } }
        engine.peerLinks.withLock { $0 = { links.map(\.status) } }
    }

    public func start() {
        for link in links { link.start() }
        guard !links.isEmpty else { return }
        engine.setRetentionFloor([:])
        updateRetentionFloor()
    }

    /// Closes every link; they stop reconnecting.
    public func stop() {
        stopped.withLock { $0 = true }
        for link in links { link.shutdown() }
    }

    /// How often the retention floor follows the peers.
    static let floorIntervalSeconds = 1

    private func updateRetentionFloor() {
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.floorIntervalSeconds)) {
            guard !self.stopped.withLock({ $0 }) else { return }
            let peers = self.links.map(\.status).filter { $0.state != "own-address" }
            let holds = peers.map { (try? VersionVector(positions: $0.peerHolds)) ?? VersionVector() }
            // Nil when every address was this node's own: a single node keeps no journal for peers.
            self.engine.setRetentionFloor(VersionVector.floor(of: holds))
            self.updateRetentionFloor()
        }
    }
}
