import Platform
import NIOCore
import NIOPosix
import RegistryCore
import RegistryWire

/// An async client for one registry node. Calls may be made concurrently from many tasks;
/// they are pipelined on one TCP connection and matched to answers by request ID.
///
/// ```swift
/// let client = try await RegistryClient.connect(to: Endpoint(parsing: "127.0.0.1:7400"), clientName: "billing")
/// let result = try await client.register(RegisterRequest(bundleID: "com.vendor.app1", idfv: idfv))
/// ```
public final class RegistryClient: Sendable {
    /// What the server said in the handshake.
    public let server: HelloAccepted
    public let endpoint: Endpoint
    private let channel: any Channel

    private init(server: HelloAccepted, endpoint: Endpoint, channel: any Channel) {
        self.server = server
        self.endpoint = endpoint
        self.channel = channel
    }

    /// Single registrations per frame at most, by default (see `maxCoalesced` in ``connect``).
    public static let defaultMaxCoalesced = 128

    /// Connects and performs the handshake.
    ///
    /// - Parameter maxCoalesced: single registrations (``register(_:)``, or `.register` bodies
    ///   through ``send(_:)`` and ``enqueue(_:onAnswer:)``) written to the connection before it
    ///   flushes travel together as one batch frame of at most this many, and never more than
    ///   the server's batch limit. Each keeps its own answer or error, in the order written; the
    ///   server does less work per registration. 1 sends every registration in a frame of its own.
    /// - Parameter ackReplicas: how many peers must hold each registration durably before the node
    ///   answers it (its write concern); nil leaves it to the node's `--ack-replicas`. Past the
    ///   node's `--replica-timeout` the answer is a retryable `replication_timeout` error.
    /// - Parameter token: the token the node requires when it runs with `--token-secret`
    ///   (`registryctl token issue`); without one such a node refuses the hello with
    ///   `unauthenticated`.
    /// - Parameter tls: connect with TLS, trusting what it names (a node run with `--tls-cert`).
    public static func connect(
        to endpoint: Endpoint, role: Role = .client, clientName: String, token: String? = nil, tls: ClientTLS? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, connectTimeout: TimeAmount = .seconds(5),
        maxCoalesced: Int = defaultMaxCoalesced, ackReplicas: UInt32? = nil
    ) async throws(RegistryClientError) -> RegistryClient {
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(connectTimeout)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(try tls.handler(for: endpoint.host)) }
                        try channel.pipeline.syncOperations.addHandlers(
                            ByteToMessageHandler(FrameDecoder(maxFrameBytes: 64 << 20)),
                            ClientChannelHandler(maxCoalesced: maxCoalesced, ackReplicas: ackReplicas))
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port).get()
        } catch let error as NIOConnectionError {
            let reasons = error.connectionErrors.map { attempt in
                (attempt.error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(attempt.error)"
            }
            throw .unreachable(
                endpoint: endpoint.description,
                reason: reasons.isEmpty ? (error.dnsAAAAError ?? error.dnsAError).map { "\($0)" } ?? "no address" : reasons.joined(separator: "; "))
        } catch {
            throw .unreachable(endpoint: endpoint.description, reason: "\(error)")
        }
        let answer: ServerBody
        do {
            answer = try await send(.hello(Hello(role: role, clientName: clientName, token: token ?? "")), on: channel)
        } catch {
            try? await channel.close()
            throw error
        }
        switch answer {
        case .helloAccepted(let accepted):
            return RegistryClient(server: accepted, endpoint: endpoint, channel: channel)
        case .error(let error):
            try? await channel.close()
            throw .server(error)
        default:
            try? await channel.close()
            throw .unexpectedResponse("\(answer) to Hello")
        }
    }

    private static func send(_ body: ClientBody, on channel: any Channel) async throws(RegistryClientError) -> ServerBody {
        let promise = channel.eventLoop.makePromise(of: ServerBody.self)
        // A write that never reaches the handler (the channel already closed) must still
        // complete the request.
        channel.writeAndFlush(PendingRequest(body: body, answer: .promise(promise))).whenFailure { error in
            promise.fail(RegistryClientError.connectionClosed("\(error)"))
        }
        do {
            return try await promise.futureResult.get()
        } catch let error as RegistryClientError {
            throw error
        } catch {
            throw .connectionClosed("\(error)")
        }
    }

    /// Sends any request and returns the server's answer as is (errors included).
    public func send(_ body: ClientBody) async throws(RegistryClientError) -> ServerBody {
        try await Self.send(body, on: channel)
    }

    /// The event loop this connection's callbacks run on.
    public var eventLoop: any EventLoop { channel.eventLoop }

    /// Queues a request without flushing it and without a task: `onAnswer` runs on
    /// ``eventLoop`` with the server's answer (errors included) or the transport failure.
    /// Call ``flush()`` to send everything queued; one flush for many requests saves system calls.
    /// For load generators and proxies; most callers want the async methods.
    ///
    /// `onAnswer` runs exactly once, and never before `enqueue` returns, even on a connection
    /// that is already closed: a caller may enqueue again from its callback.
    public func enqueue(
        _ body: ClientBody, onAnswer: @escaping @Sendable (Result<ServerBody, RegistryClientError>) -> Void
    ) {
        let eventLoop = channel.eventLoop
        channel.write(PendingRequest(body: body, answer: .callback(onAnswer))).whenFailure { error in
            // Only for writes the handler never saw (the channel had already closed).
            eventLoop.execute { onAnswer(.failure(.connectionClosed("\(error)"))) }
        }
    }

    /// Sends everything ``enqueue(_:onAnswer:)`` queued.
    public func flush() {
        channel.flush()
    }

    public func register(_ request: RegisterRequest) async throws(RegistryClientError) -> RegisterResult {
        switch try await send(.register(request)) {
        case .registerResult(let result): return result
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to RegisterRequest")
        }
    }

    /// Registers up to `server.limits.maxBatchSize` devices in one frame; one outcome each, in order.
    public func registerBatch(_ requests: [RegisterRequest]) async throws(RegistryClientError) -> [BatchItem] {
        switch try await send(.registerBatch(requests)) {
        case .registerBatchResult(let items): return items
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to RegisterBatchRequest")
        }
    }

    /// The canonical record of a device ID or alias.
    public func resolve(deviceID: String) async throws(RegistryClientError) -> DeviceRecordMessage {
        try await device(for: .resolve(deviceID: deviceID))
    }

    /// The device an identifier is claimed by within a vendor scope.
    public func lookup(_ request: LookupRequest) async throws(RegistryClientError) -> DeviceRecordMessage {
        try await device(for: .lookup(request))
    }

    private func device(for body: ClientBody) async throws(RegistryClientError) -> DeviceRecordMessage {
        switch try await send(body) {
        case .device(let record): return record
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other)")
        }
    }

    public func stats() async throws(RegistryClientError) -> StatsMessage {
        switch try await send(.stats) {
        case .stats(let stats): return stats
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to StatsRequest")
        }
    }

    /// Asks the node to take a snapshot now; returns once it is written.
    public func snapshot() async throws(RegistryClientError) -> SnapshotTaken {
        switch try await send(.snapshot) {
        case .snapshotTaken(let taken): return taken
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to SnapshotRequest")
        }
    }

    public func close() async {
        try? await channel.close()
    }
}
