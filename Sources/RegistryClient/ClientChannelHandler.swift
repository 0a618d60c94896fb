import NIOCore
import RegistryWire
import Synchronization

/// Why a connection failed, as its handler first saw it (a TLS handshake refused, say), kept
/// where a request whose write found the channel already closed can read it: otherwise that
/// request could only say "I/O on closed channel".
final class ConnectionFailure: Sendable {
    private let reason = Mutex<RegistryClientError?>(nil)

    func record(_ error: RegistryClientError) {
        reason.withLock { held in held = held ?? error }
    }

    var recorded: RegistryClientError? { reason.withLock { $0 } }
}

extension RegistryClientError {
    /// This failure of a connection as the requests it cut short see it: their outcome is
    /// unknown, so it is `connectionClosed`, saying why (a frame this client cannot read, TLS);
    /// other kinds stay as they are (a refusal of the hello is the server's).
    var forRequestsCutShort: RegistryClientError {
        switch self {
        case .unexpectedResponse(let what): return .connectionClosed("the server sent what this client cannot read: \(what)")
        case .tls(let reason): return .connectionClosed("TLS failed: \(reason)")
        default: return self
        }
    }

    /// What a request whose write found the channel closed fails with: why the connection
    /// failed (`recorded`), else the write's own error.
    static func closedBefore(_ recorded: RegistryClientError?, write: any Error) -> RegistryClientError {
        recorded?.forRequestsCutShort ?? .connectionClosed("\(write)")
    }
}

/// Where a request's answer goes: an async caller's promise, or a callback that runs on the
/// connection's event loop (for callers that must not pay for a task per request).
enum AnswerSink: Sendable {
    case promise(EventLoopPromise<ServerReply>)
    case callback(@Sendable (Result<ServerReply, RegistryClientError>) -> Void)

    func succeed(_ reply: ServerReply) {
        switch self {
        case .promise(let promise): promise.succeed(reply)
        case .callback(let callback): callback(.success(reply))
        }
    }

    func fail(_ error: RegistryClientError) {
        switch self {
        case .promise(let promise): promise.fail(error)
        case .callback(let callback): callback(.failure(error))
        }
    }
}

/// A request waiting to be written, with where its answer goes.
struct PendingRequest: Sendable {
    let body: ClientBody
    /// The request's own causal token (the session's is added when it is written).
    var after: CausalToken = .empty
    let answer: AnswerSink
}

/// Numbers outgoing requests, matches answers by request ID, and fails every waiting request
/// when the connection ends or the server sends a connection-level error. Single registrations
/// written between two flushes travel as one batch frame (see ``RegistrationCoalescer``); the
/// flush that sends them runs as a task of its own on the event loop, so that registrations
/// written by other tasks meanwhile join the frame.
final class ClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = ByteBuffer

    /// Who waits for the answer to one frame.
    private enum Waiting {
        case single(AnswerSink)
        /// The registrations of a coalesced frame, in order.
        case coalesced([AnswerSink])

        var sinks: [AnswerSink] {
            switch self {
            case .single(let sink): return [sink]
            case .coalesced(let sinks): return sinks
            }
        }
    }

    private var nextRequestID: UInt64 = 1
    private var waiting: [UInt64: Waiting] = [:]
    /// The causal token each waiting request carried, when it carried one and there is a
    /// session: its answer's token tells which of those logs the session may drop.
    private var sentAfter: [UInt64: CausalToken] = [:]
    private var closedReason: RegistryClientError?
    /// The connection is being closed by this side.
    private var closedHere = false
    private var coalescer: RegistrationCoalescer<AnswerSink>
    private var flushScheduled = false

    /// The write concern every write frame (registrations, binds and unbinds) carries; nil leaves
    /// it to the node.
    private let ackReplicas: UInt32?
    /// Merged into every request's `after`, and fed every answer's token; nil: none.
    private let session: CausalSession?
    /// The largest frame the server reads (its HelloAccepted's limits); nil until it answers.
    private var maxFrameBytes: Int?
    /// The hello's request ID while its answer is awaited.
    private var helloRequestID: UInt64?

    /// - Parameter maxCoalesced: single registrations per frame at most (1 sends each alone).
    /// - Parameter ackReplicas: peers that must hold each write before its answer.
    /// - Parameter session: the causal session requests carry and answers feed.
    /// Shared with the client, which reads it when a write finds the channel closed.
    private let failure: ConnectionFailure

    init(maxCoalesced: Int, ackReplicas: UInt32? = nil, session: CausalSession? = nil, failure: ConnectionFailure = ConnectionFailure()) {
        coalescer = RegistrationCoalescer(limit: maxCoalesced)
        self.ackReplicas = ackReplicas
        self.session = session
        self.failure = failure
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        // Once a request reaches this handler, the handler alone answers it, so the write
        // promise succeeds here; a failed write promise means the handler never saw the request.
        promise?.succeed()
        if let closedReason {
            // Answered on a later turn of the loop, never from inside the caller's write: a
            // caller that sends again from its answer callback would otherwise recurse once per
            // request, without bound, on a connection that is gone.
            context.eventLoop.execute { request.answer.fail(closedReason) }
            return
        }
        // A registration with a causal token of its own travels alone, so that the server holds
        // or refuses it for its token alone, not the frame's other callers with it.
        if case .register(let registration) = request.body, request.after.isEmpty, coalescer.accepts(registration) {
            if coalescer.hold(registration, answeringTo: request.answer) { writeHeld(context: context) }
            return
        }
        // Anything else goes after the registrations written before it.
        writeHeld(context: context)
        send(request.body, after: request.after, to: .single(request.answer), context: context)
    }

    func flush(context: ChannelHandlerContext) {
        guard !coalescer.isEmpty else { return context.flush() }
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute {
            self.flushScheduled = false
            self.writeHeld(context: context)
            context.flush()
        }
    }

    /// Writes the held registrations as one frame.
    private func writeHeld(context: ChannelHandlerContext) {
        guard let (body, sinks) = coalescer.take() else { return }
        send(body, after: .empty, to: sinks.count == 1 ? .single(sinks[0]) : .coalesced(sinks), context: context)
    }

    private func send(_ body: ClientBody, after: CausalToken, to waiter: Waiting, context: ChannelHandlerContext) {
        let id = nextRequestID
        nextRequestID += 1
        var buffer = context.channel.allocator.buffer(capacity: 128)
        do {
            let concern: UInt32?
            switch body {
            case .register, .registerBatch, .bind, .unbind, .forget, .vendor: concern = ackReplicas
            default: concern = nil
            }
            let sessionAfter: CausalToken
            if case .hello = body { sessionAfter = .empty } else { sessionAfter = session?.token ?? .empty }
            let sent = after.merging(sessionAfter)
            try ClientFrame(requestID: id, body: body, ackReplicas: concern, after: sent).encodeFrame(into: &buffer)
            if session != nil, !sent.isEmpty { sentAfter[id] = sent }
        } catch {
            fail(waiter, .unexpectedResponse("cannot encode request: \(error)"), context: context)
            return
        }
        // A frame over the server's limit is refused here, as the server would refuse it: sent,
        // it ended the connection, and every other request on it with it.
        let frameBytes = buffer.readableBytes - FrameDecoder.lengthPrefixBytes
        if let maxFrameBytes, frameBytes > maxFrameBytes {
            let error = WireError(code: .frameTooLarge, message: "the request's frame is \(frameBytes) bytes, over the server's limit of \(maxFrameBytes)")
            sentAfter[id] = nil
            fail(waiter, .server(error), context: context)
            return
        }
        waiting[id] = waiter
        if case .hello = body { helloRequestID = id }
        // A failed socket write closes the channel, and channelInactive fails every waiting request.
        context.write(wrapOutboundOut(buffer), promise: nil)
    }

    /// Fails a request refused before it was written on a later turn of the loop, never from
    /// inside the caller's write: a callback that enqueues again would otherwise recurse.
    private func fail(_ waiter: Waiting, _ error: RegistryClientError, context: ChannelHandlerContext) {
        context.eventLoop.execute { for sink in waiter.sinks { sink.fail(error) } }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame: ServerFrame
        do {
            frame = try ServerFrame(decoding: unwrapInboundIn(data))
        } catch {
            failAll(.unexpectedResponse("\(error)"))
            context.close(promise: nil)
            return
        }
        if let session {
            let sent = sentAfter.removeValue(forKey: frame.requestID)
            // Only an answer shows what the node held: a refusal (not caught up) does not.
            if let sent, !Self.isRefusal(frame.body) { session.observe(frame.token, answering: sent) } else { session.observe(frame.token) }
        }
        if frame.requestID == helloRequestID { helloRequestID = nil }
        switch waiting.removeValue(forKey: frame.requestID) {
        case .single(let answer):
            if case .helloAccepted(let accepted) = frame.body {
                coalescer.adopt(accepted.limits)
                maxFrameBytes = Int(accepted.limits.maxFrameBytes)
            }
            answer.succeed(ServerReply(body: frame.body, token: frame.token))
        case .coalesced(let answers):
            for (answer, outcome) in zip(answers, RegistrationCoalescer<AnswerSink>.split(frame.body, count: answers.count)) {
                switch outcome {
                case .success(let body): answer.succeed(ServerReply(body: body, token: frame.token))
                case .failure(let error): answer.fail(error)
                }
            }
        case nil:
            guard case .error(let error) = frame.body else { break }
            if helloRequestID != nil || nextRequestID == 1 {
                // Before the hello's answer a connection-level error refuses the hello (too
                // many connections): no request goes before that answer. The node sends it as
                // soon as it accepts, so it may come before the hello is even written: then the
                // hello, written next, fails with it.
                failAll(.server(error))
            } else {
                // An error of the connection's (a frame too large or malformed), after which the
                // server closes it: every other request's outcome is unknown, as for any closed
                // connection, not that error's.
                failAll(.connectionClosed("the server ended the connection: \(error)"))
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(.connectionClosed(closedHere ? "this client closed the connection" : "the server closed the connection"))
        context.fireChannelInactive()
    }

    /// The client closes the connection (``RegistryClient/close()``): what is still waiting fails
    /// saying so, not blaming the server.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all { closedHere = true }
        context.close(mode: mode, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(.caught(error))
        context.close(promise: nil)
    }

    /// Whether an answer refuses its request.
    private static func isRefusal(_ body: ServerBody) -> Bool {
        if case .error = body { return true }
        return false
    }

    /// Fails everything waiting for an answer, and the registrations held for a frame not yet
    /// written, and remembers why for every later request. Whatever ended the connection, the
    /// requests it cut short fail as `connectionClosed` (their outcome is unknown), saying why;
    /// only a refusal of the hello stays the server's error. The connection's own failure keeps
    /// its kind (a TLS handshake refused is `.tls` to `connect`).
    private func failAll(_ cause: RegistryClientError) {
        failure.record(cause)
        let error = cause.forRequestsCutShort
        closedReason = closedReason ?? error
        let answers = waiting.values.flatMap(\.sinks) + (coalescer.take()?.sinks ?? [])
        waiting.removeAll()
        sentAfter.removeAll()
        for answer in answers { answer.fail(error) }
    }
}
