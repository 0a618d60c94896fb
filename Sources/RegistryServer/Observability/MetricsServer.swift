import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The HTTP listener of `--metrics-port`: `/metrics`, `/healthz` and `/readyz` (see
/// ``MetricsEndpoint``). ``start()`` binds before the engine opens its storage, so probes get
/// answers during a long replay; as a service, it closes on graceful shutdown.
public final class MetricsServer: Service, Sendable {
    private let endpoint: MetricsEndpoint
    private let host: String
    private let port: Int
    private let group: any EventLoopGroup
    private let logger: Logger
    private let channel = Mutex<(any Channel)?>(nil)

    public init(endpoint: MetricsEndpoint, host: String, port: Int, group: any EventLoopGroup, logger: Logger) {
        self.endpoint = endpoint
        self.host = host
        self.port = port
        self.group = group
        self.logger = logger
    }

    /// Binds the port and serves; logs "metrics on HOST:PORT".
    public func start() async throws {
        let bound = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [endpoint] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: false)
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(endpoint: endpoint))
                }
            }
            .bind(host: host, port: port).get()
        channel.withLock { $0 = bound }
        let shown = bound.localAddress.map { "\($0.ipAddress ?? host):\($0.port ?? port)" } ?? "\(host):\(port)"
        logger.notice("metrics on \(shown)", metadata: ["paths": "/metrics /healthz /readyz"])
    }

    public func run() async throws {
        guard let bound = channel.withLock({ $0 }) else { return }
        try await withGracefulShutdownHandler {
            try await bound.closeFuture.get()
        } onGracefulShutdown: {
            bound.close(promise: nil)
        }
    }
}
