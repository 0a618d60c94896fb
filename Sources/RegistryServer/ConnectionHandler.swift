import Logging
import NIOCore
import NIOSSL
import RegistryCore
import RegistryWire

/// Asks connections to finish their in-flight requests and close (graceful shutdown).
struct DrainConnectionEvent: Sendable {}

/// Serves one client connection: cuts the byte stream into frames, decodes them, feeds
/// ``ConnectionStateMachine``, hands requests to ``ClientRequests`` in groups (one per socket
/// read), and writes the answers.
///
/// It cuts frames itself, rather than behind a `ByteToMessageHandler`, so that it can stop
/// between two frames: while the connection is at its in-flight limit, or its channel is not
/// writable, the rest of what was read waits here and no more is read (see
/// ``RequestFlowControl``).
final class ConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine: ConnectionStateMachine
    /// Bytes read and not yet cut into frames.
    private var frames: FrameReader
    private var batch: [ClientFrame] = []
    /// True while ``pump(context:)`` runs, so that answers delivered from inside it (the engine
    /// may answer on this thread, within `submit`) ask it to go round again instead of recursing.
    private var pumping = false
    private var pumpAgain = false
    private let engine: RegistryEngine
    /// This node's TLS certificate (DER); nil without TLS.
    private let ownCertificate: [UInt8]?
    /// Remembers this connection's bundles, so each is validated once.
    private var resolver: BundleResolver
    private var logger: Logger
    private var context: ChannelHandlerContext?
    /// The connection is a peer's, served by a ``PeerConnectionHandler`` from now on.
    private var handedOver = false
    /// The role this connection said hello as (client or admin), once accepted.
    private var helloRole: String?
    /// A refusal that ends the connection is being written: nothing more is read or taken.
    private var closing = false
    /// Closes the connection if no hello arrived in time (``ConnectionDeadlines/hello``).
    private var helloWatch: Scheduled<Void>?

    /// `ownCertificate`: the connection is TLS with this certificate (DER), and a peer's hello
    /// needs a verified client certificate (``NodeTLS``); its proof covers both certificates.
    init(engine: RegistryEngine, ownCertificate: [UInt8]? = nil, logger: Logger) {
        self.engine = engine
        self.logger = logger
        self.ownCertificate = ownCertificate
        self.machine = ConnectionStateMachine(
            maxInFlight: Int(engine.limits.maxInFlight), tokens: engine.tokens, peersNeedCertificate: ownCertificate != nil)
        self.frames = FrameReader(maxFrameBytes: Int(engine.limits.maxFrameBytes))
        self.resolver = engine.requests.resolver(capacity: 1024)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        logger[metadataKey: "peer"] = "\(context.remoteAddress.map { "\($0)" } ?? "?")"
        engine.counters.connectionOpened()
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        helloWatch = context.eventLoop.scheduleTask(in: ConnectionDeadlines.hello) {
            let handler = bound.value
            guard let context = handler.context, handler.machine.state == .awaitingHello, !handler.closing else { return }
            handler.failConnection(
                context: context, requestID: 0,
                WireError(code: .handshakeRequired, message: "no hello within \(ConnectionDeadlines.helloSeconds) s of connecting"))
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        helloWatch?.cancel()
        helloWatch = nil
        machine.closed()
        engine.counters.connectionClosed()
        if let role = helloRole { engine.counters.connection(role: role, by: -1) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A connection being refused takes nothing more: its bytes are dropped, not buffered.
        guard !closing else { return }
        var bytes = unwrapInboundIn(data)
        frames.append(&bytes)
        takeFrames(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        pump(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        machine.writabilityChanged(writable: context.channel.isWritable)
        if context.channel.isWritable { pump(context: context) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Whole frames left unread are requests the client gave up on; a partial one means the
        // stream ended inside a frame.
        let partial = frames.finish()
        if machine.state != .closed, partial > 0 {
            logger.info("connection closed mid-frame", metadata: ["error": "\(FrameError.truncated(bufferedBytes: partial))"])
            engine.counters.record(error: .malformedFrame)
        }
        context.fireChannelInactive()
    }

    /// Cuts and handles frames from ``frames`` while the state machine takes them.
    private func takeFrames(context: ChannelHandlerContext) {
        while machine.takesFrames {
            let payload: ByteBuffer?
            do {
                payload = try frames.next()
            } catch {
                return failConnection(context: context, requestID: 0, WireError(code: .frameTooLarge, message: error.description))
            }
            guard let payload else { break }
            handle(payload, context: context)
        }
        frames.compact()
    }

    private func handle(_ payload: ByteBuffer, context: ChannelHandlerContext) {
        let frame: ClientFrame
        do {
            frame = try ClientFrame(decoding: payload)
        } catch {
            return failConnection(context: context, requestID: 0, WireError(code: .malformedFrame, message: error.description))
        }
        // Whether TLS verified a client certificate matters only to a peer's hello.
        let certified = machine.state == .awaitingHello && (try? context.pipeline.syncOperations.nioSSL_peerCertificate()) != nil
        let action = machine.frameReceived(frame, nowSeconds: engine.wallClock() / 1_000, certified: certified)
        switch action {
        case .acceptHello, .acceptPeer:
            if case .hello(let hello) = frame.body {
                logger.debug("hello", metadata: ["client": "\(hello.clientName)", "role": "\(hello.role)"])
            }
            if case .token(let token) = machine.access { logger[metadataKey: "subject"] = "\(token.subject)" }
            // A peer's connection is counted by the peer handler it is handed to.
            if action == .acceptHello, case .hello(let hello) = frame.body {
                helloRole = "\(hello.role)"
                engine.counters.connection(role: "\(hello.role)", by: 1)
            }
            // A peer proves the cluster secret by signing this connection's challenge.
            let challenge = action == .acceptPeer ? UInt64.random(in: 1...UInt64.max) : 0
            let accepted = HelloAccepted(
                version: .current, nodeID: engine.nodeID.value, clusterID: engine.clusterID,
                serverVersion: RegistryEngine.serverVersion, limits: engine.limits, instanceID: engine.instanceID, challenge: challenge)
            write(context: context, [ServerFrame(requestID: frame.requestID, body: .helloAccepted(accepted))])
            if action == .acceptPeer { handOverToPeerProtocol(context: context, challenge: challenge) }
        case .dispatch:
            batch.append(frame)
        case .watch:
            if case .watch(let request) = frame.body { handOverToWatch(request, requestID: frame.requestID, context: context) }
        case .failConnection(let error):
            failConnection(context: context, requestID: frame.requestID, error)
        case .ignore:
            break
        }
    }

    /// The hello named the peer role: a ``PeerConnectionHandler`` takes the connection over, with
    /// the bytes already read after the hello.
    private func handOverToPeerProtocol(context: ChannelHandlerContext, challenge: UInt64) {
        handedOver = true
        context.flush()
        let rest = frames.takeRest()
        do {
            // The dialer's certificate, as TLS verified it, and this node's: the peer's proof covers both.
            let dialer = try? context.pipeline.syncOperations.nioSSL_peerCertificate()?.toDERBytes()
            let peer = PeerConnectionHandler(
                engine: engine, logger: logger, alreadyRead: rest, challenge: challenge,
                binding: ChannelBinding.of(dialer: dialer, receiver: ownCertificate))
            try context.pipeline.syncOperations.addHandler(peer, position: .after(self))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            logger.error("cannot hand a connection to the peer protocol", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    /// The client asked to watch: a ``WatchHandler`` takes the connection over, or the request is
    /// refused and the connection closed.
    private func handOverToWatch(_ request: WatchRequestMessage, requestID: UInt64, context: ChannelHandlerContext) {
        handedOver = true
        switch WatchSubscription.make(request, access: machine.access, clusterID: engine.clusterID) {
        case .failure(let error):
            engine.counters.record(error: error.code)
            refuseAndClose(context: context, requestID: requestID, error)
        case .success(let subscription):
            let watch = WatchHandler(
                hub: engine.watchHub, subscription: subscription, requestID: requestID, clusterID: engine.clusterID,
                progressMillis: engine.watchTimes.progressMillis, catchUpMillis: engine.watchTimes.catchUpMillis,
                wallClockMillis: engine.wallClock, logger: logger)
            do {
                try context.pipeline.syncOperations.addHandler(watch, position: .after(self))
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            } catch {
                logger.error("cannot hand a connection to a watch", metadata: ["error": "\(error)"])
                context.close(promise: nil)
            }
        }
    }

    /// Submits the frames taken so far as one group, takes more from what is buffered while the
    /// state machine allows, reads again once a held read may go ahead, and flushes.
    private func pump(context: ChannelHandlerContext) {
        if pumping {
            pumpAgain = true
            return
        }
        pumping = true
        repeat {
            pumpAgain = false
            takeFrames(context: context)
            if !batch.isEmpty { submitBatch(context: context) }
        } while pumpAgain
        pumping = false
        if machine.takeHeldRead() { context.read() }
        context.flush()
    }

    private func submitBatch(context: ChannelHandlerContext) {
        let frames = batch
        batch = []
        engine.requests.submit(frames, resolver: &resolver, access: machine.access, deliver: delivery(context: context))
    }

    /// Hands the engine's answers to this handler on its event loop.
    private func delivery(context: ChannelHandlerContext) -> RegistryEngine.Delivery {
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        return { answers in
            if loop.inEventLoop {
                bound.value.deliver(answers.frames)
            } else {
                loop.execute { bound.value.deliver(answers.frames) }
            }
        }
    }

    /// Writes answers from the engine and lets more requests in.
    private func deliver(_ responses: [ServerFrame]) {
        guard let context else { return }
        write(context: context, responses)
        if machine.answered(responses.count) {
            context.flush()
            context.close(promise: nil)
            return
        }
        pump(context: context)
    }

    private func write(context: ChannelHandlerContext, _ responses: [ServerFrame]) {
        var buffer = context.channel.allocator.buffer(capacity: 64 * responses.count)
        for response in responses {
            do {
                try response.encodeFrame(into: &buffer)
            } catch {
                logger.error("cannot encode a response", metadata: ["error": "\(error)"])
                let fallback = ServerFrame(
                    requestID: response.requestID, body: .error(WireError(code: .internalError, message: "\(error)")))
                try? fallback.encodeFrame(into: &buffer)
            }
        }
        context.write(wrapOutboundOut(buffer), promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        // Once handed to the peer protocol, reads are the peer handler's to pace.
        if !closing && (handedOver || machine.readRequested()) { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if case .handshakeFailed = error as? NIOSSLError {
            // Plaintext on the TLS port, an untrusted certificate, or no common protocol.
            engine.counters.tlsHandshakeFailed()
            logger.info("TLS handshake failed", metadata: ["error": "\(error)"])
        }
        logger.debug("connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is DrainConnectionEvent {
            if machine.drain() { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func failConnection(context: ChannelHandlerContext, requestID: UInt64, _ error: WireError) {
        logger.info("closing connection after a protocol error", metadata: ["error": "\(error)"])
        engine.counters.record(error: error.code)
        machine.closed()
        refuseAndClose(context: context, requestID: requestID, error)
    }

    /// Writes `error` as the answer to `requestID` and closes (``ChannelHandlerContext/writeRefusalAndClose(_:)``).
    /// Nothing is read meanwhile.
    private func refuseAndClose(context: ChannelHandlerContext, requestID: UInt64, _ error: WireError) {
        closing = true
        var buffer = context.channel.allocator.buffer(capacity: 128)
        try? ServerFrame(requestID: requestID, body: .error(error)).encodeFrame(into: &buffer)
        context.writeRefusalAndClose(buffer)
    }
}
