import NIOCore
import NIOPosix
import RegistryWire

/// One connection that watches: frames are read from the socket only when the caller asks for
/// more (the channel does not read on its own), so a caller that does not keep up holds the node
/// back through TCP instead of piling frames up in memory. A caller takes every frame that one
/// read brought at once (``nextFrames()``): each handing-over between the event loop and the
/// caller's task wakes a thread, and a node sends its events in frames of at most 256.
final class WatchConnection: Sendable {
    private let channel: any Channel
    private let handler: NIOLoopBound<WatchFrameHandler>

    private init(channel: any Channel, handler: NIOLoopBound<WatchFrameHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects, says hello, and sends `request`; returns once the hello was accepted.
    static func open(
        to endpoint: Endpoint, request: WatchRequestMessage, clientName: String, token: String?, tls: ClientTLS?,
        group: any EventLoopGroup, connectTimeout: TimeAmount, idleTimeout: TimeAmount
    ) async throws(RegistryClientError) -> (WatchConnection, HelloAccepted) {
        let connection: WatchConnection
        let helloWritten: EventLoopFuture<Void>
        var hello = ByteBuffer()
        do {
            try ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: clientName, token: token ?? ""))).encodeFrame(into: &hello)
        } catch {
            throw .unexpectedResponse("cannot encode the hello: \(error)")
        }
        do {
            (connection, helloWritten) = try await ClientBootstrap(group: group)
                .keepalive()
                .connectTimeout(connectTimeout)
                .channelOption(.autoRead, value: false)
                // Reads grow to 1 MiB (NIO's default stops at 64 KiB) while a watcher keeps
                // finding its socket full: fewer reads and hand-overs for a watcher that follows a
                // busy node; an idle one's reads shrink back as NIO's do. One `read()` reads the
                // socket at most 4 times (NIO's `maxMessagesPerRead`), so a hand-over carries at
                // most 4 MiB of the stream.
                .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2_048, maximum: 1 << 20))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(try tls.handler(for: endpoint.host)) }
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxFrameBytes: 64 << 20)))
                        try channel.pipeline.syncOperations.addHandler(WatchFrameHandler(idleTimeout: idleTimeout))
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .flatMapThrowing { [hello] channel in
                    let handler = try channel.pipeline.syncOperations.handler(type: WatchFrameHandler.self)
                    let connection = WatchConnection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
                    // A node that accepts and never answers (stopped, say) is given up once
                    // `connectTimeout` passes without the hello's answer, so that the watch moves to
                    // its next endpoint.
                    return (connection, connection.writeHello(hello, answerWithin: connectTimeout))
                }.get()
        } catch {
            throw .unreachable(endpoint: endpoint.description, reason: "\(error)")
        }
        do {
            try await helloWritten.get()
            guard let answer = try await connection.nextFrames() else { throw RegistryClientError.connectionClosed("before the hello was answered") }
            // The node answers a hello alone: nothing else comes before the watch request.
            guard answer.count == 1, let first = answer.first else {
                throw RegistryClientError.unexpectedResponse("\(answer.count) frames in answer to Hello")
            }
            switch first.body {
            case .helloAccepted(let accepted):
                try await connection.send(ClientFrame(requestID: 1, body: .watch(request)))
                return (connection, accepted)
            case .error(let error): throw RegistryClientError.server(error)
            default: throw RegistryClientError.unexpectedResponse("\(first.body) to Hello")
            }
        } catch {
            connection.close()
            throw error as? RegistryClientError ?? .connectionClosed("\(error)")
        }
    }

    private func send(_ frame: ClientFrame) async throws {
        var buffer = channel.allocator.buffer(capacity: 256)
        try frame.encodeFrame(into: &buffer)
        try await channel.writeAndFlush(buffer).get()
    }

    /// Writes the hello, on the event loop as soon as the connection is up (a caller whose task
    /// waits for a thread does not hold it back past the node's hello deadline), and from then
    /// has the loop read (the TLS handshake first, which the hello waits for, then the answer)
    /// and close the connection when no answer comes within `timeout`
    /// (``WatchFrameHandler/awaitAnswer(within:)``). Returns the write's outcome.
    private func writeHello(_ buffer: ByteBuffer, answerWithin timeout: TimeAmount) -> EventLoopFuture<Void> {
        channel.eventLoop.preconditionInEventLoop()
        handler.value.awaitAnswer(within: timeout)
        // A write the deadline cut short fails as the closed channel's: the reason is the deadline.
        return channel.writeAndFlush(buffer).flatMapErrorThrowing { [handler] error in throw handler.value.endError ?? error }
    }

    /// The frames the node sent that are read and not yet taken, at least one (waiting for one
    /// when none is); nil once the connection closed.
    func nextFrames() async throws -> [ServerFrame]? {
        try await channel.eventLoop.flatSubmit { [handler] in handler.value.nextFrames() }.get()
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Cuts nothing itself (a `FrameDecoder` before it does): decodes frames and hands them to the
/// one caller waiting, reading from the socket only while one waits or the hello's answer is due
/// (``awaitAnswer(within:)``). The frames one read brings go to the caller together, once the
/// read is complete. A node that sends nothing for `idleTimeout` while a caller waits is given
/// up: an idle node sends progress every `--watch-progress` (a second by default), so a silent
/// one has stopped, or its network has. A node that says its progress interval in the hello's
/// limits is given at least ``progressIntervalsBeforeGivingUp`` of them.
final class WatchFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    /// Progress intervals a node may miss before a watcher gives it up, whatever its idle
    /// timeout: a node configured to send progress seldom is not taken for a silent one.
    static let progressIntervalsBeforeGivingUp: Int64 = 3

    /// How long the node may send nothing while a caller waits for frames: the watch's idle
    /// timeout, or longer when the node's hello says it sends progress more seldom.
    private(set) var idleTimeout: TimeAmount
    /// Closes the connection unless the node sends something first; set while a caller waits.
    private var idleDeadline: Scheduled<Void>?

    init(idleTimeout: TimeAmount = .seconds(30)) {
        self.idleTimeout = idleTimeout
    }

    private var context: ChannelHandlerContext?
    /// Frames read and not yet taken.
    private var frames: [ServerFrame] = []
    private var waiting: EventLoopPromise<[ServerFrame]?>?
    private var ended: (any Error)??
    /// Closes the connection unless a frame arrives first; set while the hello's answer is due.
    private var answerDeadline: Scheduled<Void>?

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// The frames read and not yet taken, read from the socket when there are none.
    func nextFrames() -> EventLoopFuture<[ServerFrame]?> {
        guard let context else { return MultiThreadedEventLoopGroup.singleton.any().makeSucceededFuture(nil) }
        if !frames.isEmpty { return context.eventLoop.makeSucceededFuture(takeFrames()) }
        if let ended {
            if let error = ended { return context.eventLoop.makeFailedFuture(error) }
            return context.eventLoop.makeSucceededFuture(nil)
        }
        let promise = context.eventLoop.makePromise(of: [ServerFrame]?.self)
        waiting = promise
        // The hello's answer has a deadline of its own (awaitAnswer(within:)).
        if answerDeadline == nil { armIdleDeadline(context) }
        context.read()
        return promise.futureResult
    }

    /// Starts the wait for the node's next bytes over (``idleTimeout``).
    private func armIdleDeadline(_ context: ChannelHandlerContext) {
        idleDeadline?.cancel()
        idleDeadline = endUnlessHeard(
            within: idleTimeout, context: context, because: "the node sent nothing for \(idleTimeout.nanoseconds / 1_000_000) ms, not even progress")
    }

    /// Ends the connection (``RegistryClientError/connectionClosed(_:)``, `reason`) once `timeout`
    /// passes, unless cancelled first; the close cancels every deadline (`channelInactive`).
    private func endUnlessHeard(within timeout: TimeAmount, context: ChannelHandlerContext, because reason: String) -> Scheduled<Void> {
        context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            end(RegistryClientError.connectionClosed(reason))
            context.close(promise: nil)
        }
    }

    /// Why the connection ended, once it ended with an error.
    var endError: (any Error)? { ended ?? nil }

    /// Reads from now on, until the node's answer to the hello (and, with TLS, the handshake the
    /// hello waits for: the TLS handler reads on while it has no plaintext to hand on), and ends
    /// the connection (``RegistryClientError/connectionClosed(_:)``) when no whole frame arrives
    /// within `timeout`. The deadline is kept on the event loop, from the network's side: a caller
    /// whose task waits for a thread in a busy process is not taken for a node that never
    /// answers, since the answer is read and kept for it whenever it comes to take it.
    func awaitAnswer(within timeout: TimeAmount) {
        guard let context, ended == nil else { return }
        answerDeadline = endUnlessHeard(
            within: timeout, context: context, because: "before the hello was answered: no answer within \(timeout.nanoseconds / 1_000_000) ms")
        context.read()
    }

    private func takeFrames() -> [ServerFrame] {
        defer { frames = [] }
        return frames
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // After a frame that does not decode, the frames behind it (which the decoder still hands
        // on as the channel closes) are dropped: yielding a later frame's cursor would skip the
        // bad frame's events, which the next connection sends again from the cursor before it.
        guard ended == nil else { return }
        answerDeadline?.cancel()
        answerDeadline = nil
        let payload = unwrapInboundIn(data)
        do {
            let frame = try ServerFrame(decoding: payload)
            if case .helloAccepted(let accepted) = frame.body, accepted.limits.watchProgressMillis > 0 {
                let intervals = TimeAmount.milliseconds(Int64(accepted.limits.watchProgressMillis) * Self.progressIntervalsBeforeGivingUp)
                idleTimeout = max(idleTimeout, intervals)
            }
            frames.append(frame)
        } catch {
            end(RegistryClientError.unexpectedResponse("a frame that does not decode: \(error)"))
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if frames.isEmpty {
            // A read that brought no whole frame: read on for the caller still waiting, or for
            // the hello's answer that is due. Bytes came: the node is there.
            if waiting != nil && answerDeadline == nil { armIdleDeadline(context) }
            if waiting != nil || answerDeadline != nil { context.read() }
        } else if let promise = waiting {
            waiting = nil
            idleDeadline?.cancel()
            idleDeadline = nil
            promise.succeed(takeFrames())
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        answerDeadline?.cancel()
        answerDeadline = nil
        idleDeadline?.cancel()
        idleDeadline = nil
        end(nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A failed TLS handshake is a TLS failure, as for a client's connection.
        end(RegistryClientError.caught(error))
        context.close(promise: nil)
    }

    /// The connection ends after the frames read: a caller waiting gets those first, and the
    /// end (`error`, or nil for a clean close) with its next call.
    private func end(_ error: (any Error)?) {
        guard ended == nil else { return }
        ended = .some(error)
        if let promise = waiting {
            waiting = nil
            if !frames.isEmpty { return promise.succeed(takeFrames()) }
            if let error { promise.fail(error) } else { promise.succeed(nil) }
        }
    }
}
