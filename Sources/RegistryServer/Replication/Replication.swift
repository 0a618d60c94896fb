import Platform
import Dispatch
import Logging
import NIOCore
import NIOSSL
import RegistryCore
import Synchronization

/// This node's side of the cluster: one ``PeerLink`` per peer, each streaming to its peer what
/// the peer lacks. The peers are the `--peers` addresses, and every member the cluster's
/// membership operations name (a node that joined by naming another member), less the removed
/// ones. Receiving needs nothing here: any node accepts peer connections
/// (``PeerConnectionHandler``).
///
/// Every second it follows the members (links for new ones, none for removed ones) and sets the
/// journal's retention floor: a journal file is trimmed only once every linked peer that is not
/// removed holds what it holds (as the peers last said; one never heard from holds nothing), so
/// that a peer that was down catches up from the log.
public final class Replication: Sendable {
    private let links: Mutex<[PeerLink]>
    private let engine: RegistryEngine
    private let group: any EventLoopGroup
    private let logger: Logger
    private let stopped = Mutex(false)
    /// When ``start()`` ran, in uptime nanoseconds.
    private let startedAt = Mutex<UInt64>(0)
    /// How long links that have not yet reached their peer hold back links to members: such a
    /// link may be the one to that member, reached at another address (a proxy, a service name).
    static let identifyingSeconds: UInt64 = 10

    /// TLS for dialling peers (``NodeTLS/peerClient``) and this node's certificate (DER); nil:
    /// plain TCP.
    private let tls: (context: NIOSSLContext, certificate: [UInt8])?

    public init(
        engine: RegistryEngine, peers: [PeerAddress], group: any EventLoopGroup, tls: (context: NIOSSLContext, certificate: [UInt8])? = nil,
        logger: Logger
    ) {
        self.tls = tls
        let links = Mutex(peers.map { PeerLink(address: $0, configured: true, engine: engine, group: group, tls: tls, logger: logger) })
        self.links = links
        self.engine = engine
        self.group = group
        self.logger = logger
        engine.pipeline.observeCommits { [weak self] in
            for link in self?.current ?? [] { link.commitHappened() }
        }
        engine.links.attach({ [weak self] in (self?.current ?? []).map(\.status) }, askHoldings: { [weak self] in for link in self?.current ?? [] { link.askHoldings() } })
    }

    private var current: [PeerLink] { links.withLock { $0 } }

    public func start() {
        startedAt.withLock { $0 = SystemClock.monotonicNanos() }
        for link in current { link.start() }
        // Nothing heard yet: what a member with no link holds is nothing, so a node that lists
        // members keeps its journal (nil, no floor, only for a node alone).
        engine.setRetentionFloor(ClusterPeers.retentionFloor(links: current.map(\.status), members: engine.members, own: engine.nodeID))
        followMembers()
    }

    /// Closes every link; they stop reconnecting.
    public func stop() {
        stopped.withLock { $0 = true }
        for link in current { link.shutdown() }
    }

    /// How often the links and the retention floor follow the members and the peers.
    static let floorIntervalSeconds = 1

    private func followMembers() {
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Self.floorIntervalSeconds)) { [weak self] in
            guard let self, !self.stopped.withLock({ $0 }) else { return }
            self.updateLinks()
            self.engine.setRetentionFloor(
                ClusterPeers.retentionFloor(links: self.current.map(\.status), members: self.engine.members, own: self.engine.nodeID))
            self.followMembers()
        }
    }

    /// Links to members that have none, or whose link has not reached them for a while at an
    /// address they no longer advertise; no link to removed ones.
    private func updateLinks() {
        let members = engine.members
        let starting = SystemClock.monotonicNanos() - startedAt.withLock { $0 } < Self.identifyingSeconds * 1_000_000_000
        let (added, removed, superseded) = links.withLock { links -> ([PeerLink], [PeerLink], [PeerLink]) in
            // This node was removed: every peer refuses it (a welcome, then NODE_REMOVED, each
            // time it dials), and it refuses every write, so it has nothing to send any more.
            if members[engine.nodeID]?.removed == true {
                defer { links = [] }
                return ([], links, [])
            }
            let unidentified = links.contains { $0.status.nodeID.isEmpty && $0.status.state != "own-address" }
            let gone = links.filter { link in
                guard let node = try? NodeID(link.status.nodeID) else { return false }
                return members[node]?.removed == true
            }
            links.removeAll { link in gone.contains { $0 === link } }
            var added = [PeerLink]()
            if starting && unidentified { return (added, gone, []) }
            let now = SystemClock.monotonicMillis()
            var superseded = [PeerLink]()
            for (node, member) in members where node != engine.nodeID && !member.removed && !member.address.isEmpty {
                // A member's link is one at the address it advertises, or one that reached it
                // elsewhere (a relay, a service name) and still does: streaming now, or within the
                // last few seconds (a reconnect). One that has not reached it for longer, at another
                // address, is no longer its link: the member moved (a new IP), and a link follows it.
                let known = links.contains { link in
                    let status = link.status
                    guard link.address.description != member.address else { return true }
                    guard status.nodeID == node.value else { return false }
                    return status.state == "streaming" || status.state == "sending-snapshot" || status.streamedAtMillis == 0
                        || now < status.streamedAtMillis + Self.identifyingSeconds * 1_000
                }
                guard !known, let address = try? PeerAddress(parsing: member.address) else { continue }
                let link = PeerLink(address: address, configured: false, engine: engine, group: group, tls: tls, logger: logger)
                // A link made for the member's old address goes; one `--peers` names stays.
                superseded += links.filter { !$0.status.configured && $0.status.nodeID == node.value }
                links.append(link)
                added.append(link)
            }
            links.removeAll { link in superseded.contains { $0 === link } }
            return (added, gone, superseded)
        }
        for link in removed {
            logger.notice("closing the link to a removed member, or of this removed node", metadata: ["peer_address": "\(link.address)"])
            link.shutdown()
        }
        for link in superseded {
            logger.notice("closing a link to a member's old address", metadata: ["peer_address": "\(link.address)"])
            link.shutdown()
        }
        for link in added {
            logger.notice("linking to a member at the address it advertises", metadata: ["peer_address": "\(link.address)"])
            link.start()
        }
    }
}
