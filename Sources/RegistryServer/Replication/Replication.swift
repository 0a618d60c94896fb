import Logging
import NIOCore

/// This node's side of the cluster: one ``PeerLink`` per `--peers` address, each streaming to
/// its peer what the peer lacks. Receiving needs nothing here: any node accepts peer
/// connections (``PeerConnectionHandler``).
public final class Replication: Sendable {
    private let links: [PeerLink]

    public init(engine: RegistryEngine, peers: [PeerAddress], group: any EventLoopGroup, logger: Logger) {
        let links = peers.map { PeerLink(address: $0, engine: engine, group: group, logger: logger) }
        self.links = links
        engine.observeCommits { for link in links { link.commitHappened() } }
        engine.peerLinks.withLock { $0 = { links.map(\.status) } }
    }

    public func start() {
        for link in links { link.start() }
    }

    /// Closes every link; they stop reconnecting.
    public func stop() {
        for link in links { link.shutdown() }
    }
}
