import Logging
import NIOCore
import NIOPosix
import NIOSSL
import RegistryWire
import ServiceLifecycle
import Synchronization

/// The TCP server of one node, run as a ServiceLifecycle service. On graceful shutdown it stops
/// accepting, lets open connections finish what is in flight (up to the drain timeout), closes
/// them, and then closes storage.
public final class RegistryServer: Service, Sendable {
    private let engine: RegistryEngine
    private let host: String
    private let port: Int
    private let drainTimeout: TimeAmount
    private let logger: Logger
    private let group: any EventLoopGroup
    /// The connections this node holds (refused ones are not), closed at shutdown.
    private let connections = Mutex<[ObjectIdentifier: any Channel]>([:])
    /// `--max-connections`: one more is refused (``ConnectionLimitRefusal``).
    private let maxConnections: Int
    /// Streams this node's operations to its peers.
    private let replication: Replication
    /// Where peers reach this node (`--advertise`); nil: where it listens.
    private let advertise: String?
    private let hasPeers: Bool
    private let boundAddress = Mutex<SocketAddress?>(nil)
    /// TLS for every connection (``NodeTLS``); nil: plain TCP.
    private let tls: NodeTLS?

    /// `tls` comes from ``NodeTLS/load(_:)`` of the same configuration.
    public init(
        engine: RegistryEngine, configuration: NodeConfiguration, tls: NodeTLS? = nil, logger: Logger,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.tls = tls
        self.engine = engine
        self.host = configuration.host
        self.port = configuration.port
        self.drainTimeout = .milliseconds(Int64(configuration.drainTimeoutSeconds * 1_000))
        self.maxConnections = configuration.maxConnections
        self.logger = logger
        self.group = group
        self.replication = Replication(
            engine: engine, peers: configuration.peers, group: group, tls: tls.map { ($0.peerClient, $0.certificate) }, logger: logger)
        self.advertise = configuration.advertise
        self.hasPeers = !configuration.peers.isEmpty
    }

    /// Answer bytes a connection may have written and not yet handed to its socket before it
    /// takes no more requests.
    static let writeBufferWaterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 64 << 10, high: 256 << 10)

    /// The address the server listens on, once `run` has bound it.
    public var localAddress: SocketAddress? { boundAddress.withLock { $0 } }

    public func run() async throws {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childKeepalive()
            .childChannelOption(.maxMessagesPerRead, value: 16)
            // Above the high mark a connection takes no more requests until its answers drain
            // below the low one (see RequestFlowControl).
            .childChannelOption(.writeBufferWaterMark, value: Self.writeBufferWaterMark)
            .childChannelInitializer { [engine, logger, tls, maxConnections] channel in
                let admitted = self.track(channel)
                if !admitted { engine.counters.record(error: .tooManyConnections) }
                return channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.server)) }
                    try channel.pipeline.syncOperations.addHandler(
                        admitted
                            ? ConnectionHandler(engine: engine, ownCertificate: tls?.certificate, logger: logger)
                            : ConnectionLimitRefusal(limit: maxConnections))
                }
            }
            .bind(host: host, port: port).get()
        boundAddress.withLock { $0 = channel.localAddress }
        let shown = channel.localAddress.map { "\($0.ipAddress ?? host):\($0.port ?? port)" } ?? "\(host):\(port)"
        logger.notice("listening on \(shown)", metadata: ["node": "\(engine.nodeID)", "cluster": "\(engine.clusterID)"])
        // In a cluster (peers configured, or a peer connects later), this node is a member,
        // reached where it says (--advertise, or where it listens). A wildcard host names no
        // address a peer can reach (a peer dialling 0.0.0.0 reaches itself): no join is logged
        // for it, and with --peers the configuration refuses it (`refuseUnreachableAdvertise`).
        engine.membership.advertisedAddress.withLock {
            $0 = advertise ?? (NodeConfiguration.isWildcard(host) ? nil : "\(host):\(channel.localAddress?.port ?? port)")
        }
        if hasPeers { engine.membership.joinCluster() }
        replication.start()

        try await withGracefulShutdownHandler {
            try await channel.closeFuture.get()
        } onGracefulShutdown: {
            channel.close(promise: nil)
        }
        replication.stop()
        await drainConnections()
        engine.close()
    }

    /// Holds `channel` among the connections unless they number `maxConnections` already;
    /// returns whether it was taken.
    private func track(_ channel: any Channel) -> Bool {
        let key = ObjectIdentifier(channel)
        let admitted = connections.withLock { connections in
            guard connections.count < maxConnections else { return false }
            connections[key] = channel
            return true
        }
        guard admitted else { return false }
        channel.closeFuture.whenComplete { _ in
            self.connections.withLock { _ = $0.removeValue(forKey: key) }
        }
        return true
    }

    private func drainConnections() async {
        let open = connections.withLock { Array($0.values) }
        logger.info("draining connections", metadata: ["open": "\(open.count)"])
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(DrainConnectionEvent())
        }
        let deadline = NIODeadline.now() + drainTimeout
        for channel in open {
            let remaining = deadline - .now()
            if remaining > .zero {
                let closed = channel.eventLoop.scheduleTask(in: remaining) { channel.close(promise: nil) }
                try? await channel.closeFuture.get()
                closed.cancel()
            } else {
                try? await channel.close()
            }
        }
    }
}

extension ServerBootstrap {
    /// This bootstrap with ``TCPKeepalive`` on every connection it accepts: a client whose host
    /// died stops holding a place under `--max-connections` about two minutes later.
    func childKeepalive() -> ServerBootstrap {
        TCPKeepalive.options.reduce(self) { $0.childChannelOption($1.option, value: $1.value) }
    }
}
