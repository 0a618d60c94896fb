import RegistryWire

/// What one link to a peer shows in `registryctl cluster status`.
public struct PeerLinkStatus: Equatable, Sendable {
    /// As `--peers` names it, or as a member advertised it.
    public var address: String
    /// Whether `--peers` names the address (a link the node made for a member's advertised
    /// address is that member's: ``Replication``).
    public var configured = false
    /// When the link last streamed to its peer, on this node's monotonic clock (ms); 0 when never.
    public var streamedAtMillis: UInt64 = 0
    /// The peer's node ID, once its hello was answered.
    public var nodeID = ""
    /// The peer's node ID once it proved the cluster secret (the link streamed to it): a node of
    /// this cluster for sure, kept while the link reconnects.
    public var provenNodeID = ""
    /// disconnected, connecting, handshaking, streaming, sending-snapshot or own-address.
    public var state = "disconnected"
    /// Operations this node holds that the peer is not known to hold.
    public var backlogOperations: UInt64 = 0
    public var inFlightBatches: UInt64 = 0
    /// The HLC milliseconds of the oldest operation sent and not acknowledged; 0 when none.
    public var oldestUnacknowledgedMillis: UInt64 = 0
    /// What the peer holds, as far as this node knows.
    public var peerHolds: [LogPosition] = []
    /// When the newest batch the peer acknowledged while streaming was sent, on this node's
    /// monotonic clock (ms): `peerHolds` holds at least what the peer held then. 0 when none.
    public var answeredAtMillis: UInt64 = 0
    public var reconnects: UInt64 = 0
    public var lastError = ""
    public var sentOperations: UInt64 = 0
    /// The protocol version the peer's last welcome gave; nil before one.
    public var peerVersion: ProtocolVersion?

    public init(address: String) {
        self.address = address
    }
}
