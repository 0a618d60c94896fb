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
    /// The causal session every request carries and every answer feeds; nil: none.
    public let session: CausalSession?
    private let channel: any Channel
    /// How long a call waits for its answer before the connection is given up; nil: as long as
    /// the connection lasts (see ``connect(to:role:clientName:token:tls:group:connectTimeout:handshakeTimeout:answerTimeout:maxCoalesced:ackReplicas:session:)``).
    public let answerTimeout: TimeAmount?

    /// Why the connection failed, as its handler first saw it: what a call whose write finds the
    /// channel closed says.
    private let failure: ConnectionFailure

    private init(
        server: HelloAccepted, endpoint: Endpoint, session: CausalSession?, channel: any Channel, answerTimeout: TimeAmount?, failure: ConnectionFailure
    ) {
        self.server = server
        self.endpoint = endpoint
        self.session = session
        self.channel = channel
        self.answerTimeout = answerTimeout
        self.failure = failure
    }

    /// A client let go of without ``close()`` closes its connection: the node gives its place back.
    /// (A closed one is left alone: its event loop may be shut down by now.)
    deinit {
        if channel.isActive { channel.close(promise: nil) }
    }

    /// Single registrations per frame at most, by default (see `maxCoalesced` in ``connect``).
    public static let defaultMaxCoalesced = 128

    /// Connects and performs the handshake.
    ///
    /// - Parameter maxCoalesced: single registrations (``register(_:)``, or `.register` bodies
    ///   through ``send(_:)`` and ``enqueue(_:after:onAnswer:)``) written to the connection before it
    ///   flushes travel together as one batch frame of at most this many, and never more than
    ///   the server's batch limit. Each keeps its own answer or error, in the order written; the
    ///   server does less work per registration. 1 sends every registration in a frame of its own.
    /// - Parameter ackReplicas: how many peers must hold each write (registration, bind, unbind)
    ///   durably before the node answers it (its write concern); nil leaves it to the node's `--ack-replicas`. Past the
    ///   node's `--replica-timeout` the answer is a retryable `replication_timeout` error.
    /// - Parameter token: the token the node requires when it runs with `--token-secret`
    ///   (`registryctl token issue`); without one such a node refuses the hello with
    ///   `unauthenticated`.
    /// - Parameter tls: connect with TLS, trusting what it names (a node run with `--tls-cert`).
    /// - Parameter handshakeTimeout: how long to wait for the node's answer to the hello once
    ///   connected, before giving the connection up (``RegistryClientError/connectionClosed(_:)``):
    ///   a node that accepts connections but stopped answering. nil (the default) waits as long
    ///   as the connection lasts.
    /// - Parameter answerTimeout: how long each call (``send(_:)``, ``register(_:)`` and the
    ///   others, not ``enqueue(_:after:onAnswer:)``) waits for its answer before the connection is
    ///   given up: that call and every other still waiting fail with
    ///   ``RegistryClientError/connectionClosed(_:)``, as after ``abandon(reason:)``; connect
    ///   again. A write may or may not have been made. Set it above the slowest call you make:
    ///   a snapshot, or a vendor rule change, which waits up to 2 s plus the node's
    ///   `--causal-timeout` for its peers. nil (the default) waits as long as the connection
    ///   lasts. Either way a call returns at once when its task is cancelled
    ///   (``RegistryClientError/cancelled``).
    /// - Parameter session: read your writes: every request carries the session's causal token,
    ///   and every answer's token joins it (``CausalSession``). By default each client has its
    ///   own; pass one session to the clients of several nodes for a guarantee across them, or
    ///   nil for none (each request then carries only the token given with it).
    public static func connect(
        to endpoint: Endpoint, role: Role = .client, clientName: String, token: String? = nil, tls: ClientTLS? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, connectTimeout: TimeAmount = .seconds(5),
        handshakeTimeout: TimeAmount? = nil, answerTimeout: TimeAmount? = nil, maxCoalesced: Int = defaultMaxCoalesced, ackReplicas: UInt32? = nil,
        session: CausalSession? = CausalSession()
    ) async throws(RegistryClientError) -> RegistryClient {
        let channel: any Channel
        let hello: EventLoopPromise<ServerReply>
        let failure = ConnectionFailure()
        let giveUp = handshakeTimeout.map { ($0, "no answer to the hello in \(Double($0.nanoseconds) / 1e9)s") }
        do {
            (channel, hello) = try await ClientBootstrap(group: group)
                .keepalive()
                .connectTimeout(connectTimeout)
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(try tls.handler(for: endpoint.host)) }
                        try channel.pipeline.syncOperations.addHandlers(
                            ByteToMessageHandler(FrameDecoder(maxFrameBytes: 64 << 20)),
                            ClientChannelHandler(maxCoalesced: maxCoalesced, ackReplicas: ackReplicas, session: session, failure: failure))
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                // The hello goes out from the event loop as soon as the connection is up: a
                // caller whose task waits for a thread does not hold it back past the node's
                // hello deadline.
                .map { channel in
                    (channel, write(.hello(Hello(role: role, clientName: clientName, token: token ?? "")), after: .empty, on: channel, giveUp: giveUp))
                }.get()
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
            answer = try await wait(for: hello, on: channel).body
        } catch {
            try? await channel.close()
            // A TLS handshake the server refused closes the channel, and the hello's write can
            // find it closed before its answer is failed with the reason: say the reason. A
            // cancelled connect says so, not what closing the channel afterwards recorded.
            throw error == .cancelled ? error : failure.recorded ?? error
        }
        switch answer {
        case .helloAccepted(let accepted):
            return RegistryClient(
                server: accepted, endpoint: endpoint, session: session, channel: channel, answerTimeout: answerTimeout, failure: failure)
        case .error(let error):
            try? await channel.close()
            throw .server(error)
        default:
            try? await channel.close()
            throw .unexpectedResponse("\(answer) to Hello")
        }
    }

    /// Sends `body` on `channel` and waits for its answer. With `giveUp`, a request still
    /// unanswered after that long gives the connection up (``abandon(reason:)``, with that
    /// reason). The answer cancels the watch on the channel's event loop, where the watch runs
    /// too, so an answer in time never loses the connection. A cancelled task stops waiting at
    /// once (``RegistryClientError/cancelled``); the answer, if it comes, is dropped.
    private static func send(
        _ body: ClientBody, after: CausalToken, on channel: any Channel, giveUp: (after: TimeAmount, reason: String)? = nil,
        failure: ConnectionFailure? = nil
    ) async throws(RegistryClientError) -> ServerReply {
        try await wait(for: write(body, after: after, on: channel, giveUp: giveUp, failure: failure), on: channel)
    }

    /// Writes `body` on `channel` (from any thread), and with `giveUp` arms its watch; returns
    /// the promise the caller waits on, which the answer completes, or a cancellation first.
    /// The watch ends with the answer, not with the caller's wait: a caller that gives up (its
    /// own deadline, a cancelled task) still leaves the connection watched, so a node that stops
    /// answering is given up all the same.
    private static func write(
        _ body: ClientBody, after: CausalToken, on channel: any Channel, giveUp: (after: TimeAmount, reason: String)?,
        failure: ConnectionFailure? = nil
    ) -> EventLoopPromise<ServerReply> {
        let answer = channel.eventLoop.makePromise(of: ServerReply.self)
        let caller = channel.eventLoop.makePromise(of: ServerReply.self)
        if let giveUp {
            let watch = channel.eventLoop.scheduleTask(in: giveUp.after) { channel.pipeline.fireErrorCaught(Abandoned(reason: giveUp.reason)) }
            // Registered before the request is written, so before any answer can complete it.
            answer.futureResult.whenComplete { _ in watch.cancel() }
        }
        answer.futureResult.cascade(to: caller)
        // A write that never reaches the handler (the channel already closed) must still
        // complete the request.
        channel.writeAndFlush(PendingRequest(body: body, after: after, answer: .promise(answer))).whenFailure { error in
            answer.fail(RegistryClientError.closedBefore(failure?.recorded, write: error))
        }
        return caller
    }

    /// Waits for the answer `promise` gets; a cancelled task stops waiting at once.
    private static func wait(for promise: EventLoopPromise<ServerReply>, on channel: any Channel) async throws(RegistryClientError) -> ServerReply {
        do {
            return try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                // On the loop, where the handler completes it too: the first completion counts.
                channel.eventLoop.execute { promise.fail(RegistryClientError.cancelled) }
            }
        } catch let error as RegistryClientError {
            throw error
        } catch {
            throw .connectionClosed("\(error)")
        }
    }

    /// Sends any request and returns the server's answer as is (errors included).
    public func send(_ body: ClientBody) async throws(RegistryClientError) -> ServerBody {
        try await reply(body).body
    }

    /// Sends any request, to be answered only by a node that holds what `after` names (with the
    /// session's token), and returns the answer as is with its own causal token.
    public func reply(_ body: ClientBody, after: CausalToken = .empty) async throws(RegistryClientError) -> ServerReply {
        try await Self.send(body, after: after, on: channel, giveUp: giveUp, failure: failure)
    }

    /// What ``answerTimeout`` makes of a call's wait.
    private var giveUp: (after: TimeAmount, reason: String)? {
        answerTimeout.map { ($0, "no answer within \(Double($0.nanoseconds) / 1e9) s (answerTimeout)") }
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
    ///
    /// `after`: answer only from a node that holds what it names (merged with the session's).
    public func enqueue(
        _ body: ClientBody, after: CausalToken = .empty, onAnswer: @escaping @Sendable (Result<ServerReply, RegistryClientError>) -> Void
    ) {
        let eventLoop = channel.eventLoop
        let failure = self.failure
        channel.write(PendingRequest(body: body, after: after, answer: .callback(onAnswer))).whenFailure { error in
            // Only for writes the handler never saw (the channel had already closed).
            eventLoop.execute { onAnswer(.failure(.closedBefore(failure.recorded, write: error))) }
        }
    }

    /// Sends everything ``enqueue(_:after:onAnswer:)`` queued.
    public func flush() {
        channel.flush()
    }

    public func register(_ request: RegisterRequest) async throws(RegistryClientError) -> RegisterResult {
        try await register(request, after: .empty).result
    }

    /// Registers as a node that holds what `after` names sees the device: an app that keeps the
    /// returned token beside its keychain UUID (in the vendor's shared keychain) and sends it
    /// with its next registration, from any of the vendor's apps, is never told of a second
    /// device because that registration reached a node that had not yet heard of the first.
    public func register(
        _ request: RegisterRequest, after: CausalToken
    ) async throws(RegistryClientError) -> (result: RegisterResult, token: CausalToken) {
        let reply = try await Self.send(.register(request), after: after, on: channel, giveUp: giveUp, failure: failure)
        switch reply.body {
        case .registerResult(let result): return (result, reply.token)
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

    /// Forgets a device (`docs/identity.md`, "Erasure"): from the answer on, it and every ID
    /// merged with it answer ``RegistryWire/ErrorCode/gone``, its identifiers are released (an
    /// app that registers them again gets a new ID), and its account bindings are removed. A
    /// device gone already is answered with ``ForgetResultMessage/alreadyGone``, so retrying is
    /// safe. The connection's `ackReplicas` applies.
    public func forget(deviceID: String) async throws(RegistryClientError) -> ForgetResultMessage {
        switch try await send(.forget(deviceID: deviceID)) {
        case .forgetResult(let result): return result
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to a forget")
        }
    }

    /// Lists the cluster's vendor rules (``VendorRequestMessage/list``), or changes them (admin;
    /// `docs/identity.md`, "Vendors kept by the cluster"): the answer is the rules in force after
    /// the change, on this node at once and on every node once it has replicated.
    public func vendors(_ request: VendorRequestMessage = .list) async throws(RegistryClientError) -> VendorRulesMessage {
        switch try await send(.vendor(request)) {
        case .vendorRules(let rules): return rules
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to a vendor request")
        }
    }

    /// Binds `account` (the vendor backend's name for it) to a device of the vendor `scope` names.
    /// A bind past the vendor's limit is not an error: its outcome is ``BindOutcomeCode/rejected``
    /// (the `reject` policy; the answer lists the bound devices) or ``BindOutcomeCode/bound`` with
    /// the replaced device (the `replace` policy).
    public func bind(account: String, deviceID: String, scope: LookupRequest.Scope) async throws(RegistryClientError) -> BindResultMessage {
        try await binding(.bind(BindingRequest(scope: scope, account: account, deviceID: deviceID)))
    }

    /// Unbinds `account` from a device; an account not bound to it is answered
    /// ``BindOutcomeCode/notBound``, changing nothing.
    public func unbind(account: String, deviceID: String, scope: LookupRequest.Scope) async throws(RegistryClientError) -> BindResultMessage {
        try await binding(.unbind(BindingRequest(scope: scope, account: account, deviceID: deviceID)))
    }

    /// The connection's `ackReplicas` applies to binds and unbinds as to registrations.
    private func binding(_ body: ClientBody) async throws(RegistryClientError) -> BindResultMessage {
        switch try await send(body) {
        case .bindResult(let result): return result
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to a bind or an unbind")
        }
    }

    /// An account's devices (``AccountQuery/Subject/account(_:)`` or
    /// ``AccountQuery/Subject/accountKey(_:)``: none when it has no binding), or every account
    /// whose binds named a device (``AccountQuery/Subject/device(_:)``).
    public func accounts(_ query: AccountQuery) async throws(RegistryClientError) -> [AccountBindingsMessage] {
        switch try await send(.account(query)) {
        case .accounts(let accounts): return accounts
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to AccountRequest")
        }
    }

    /// The suspected keychain clones the node holds (`docs/identity.md`, "Keychains cloned onto
    /// another phone"): of `vendor` (a name or a bundle ID), or of every vendor the token reaches
    /// when nil. Sorted by when the evidence was seen.
    public func clones(vendor: String? = nil) async throws(RegistryClientError) -> [SuspectedCloneMessage] {
        switch try await send(.clones(vendor: vendor ?? "")) {
        case .clones(let clones): return clones
        case .error(let error): throw .server(error)
        case let other: throw .unexpectedResponse("\(other) to ClonesRequest")
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

    /// Gives the connection up without waiting any longer: every request still waiting for an
    /// answer fails with ``RegistryClientError/connectionClosed(_:)`` carrying `reason`, and the
    /// connection closes; later requests fail with `connectionClosed` too. For a caller that
    /// stops waiting for a server that stopped answering. Callable from any thread.
    public func abandon(reason: String) {
        channel.pipeline.fireErrorCaught(Abandoned(reason: reason))
    }

    /// Why the caller gave the connection up (``abandon(reason:)``).
    struct Abandoned: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }
}
