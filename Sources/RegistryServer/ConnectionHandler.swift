import Logging
import NIOCore
import RegistryCore
import RegistryWire

/// Asks connections to finish their in-flight requests and close (graceful shutdown).
struct DrainConnectionEvent: Sendable {}

/// Serves one client connection: decodes frame payloads, feeds ``ConnectionStateMachine``,
/// hands requests to the engine in groups (one per socket read), and writes the answers.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var machine: ConnectionStateMachine
    private var batch: [ClientFrame] = []
    private let engine: RegistryEngine
    /// Remembers this connection's bundles, so each is validated once.
    private var resolver: BundleResolver
    private var logger: Logger
    private var context: ChannelHandlerContext?

    init(engine: RegistryEngine, logger: Logger) {
        self.engine = engine
        self.logger = logger
        self.machine = ConnectionStateMachine(maxInFlight: Int(engine.limits.maxInFlight))
        self.resolver = BundleResolver(rules: engine.vendorRules, capacity: 1024)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        logger[metadataKey: "peer"] = "\(context.remoteAddress.map { "\($0)" } ?? "?")"
        engine.counters.connectionOpened()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        machine.closed()
        engine.counters.connectionClosed()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let payload = unwrapInboundIn(data)
        let frame: ClientFrame
        do {
            frame = try ClientFrame(decoding: payload)
        } catch {
            return failConnection(context: context, requestID: 0, WireError(code: .malformedFrame, message: error.description))
        }
        switch machine.frameReceived(frame) {
        case .acceptHello:
            if case .hello(let hello) = frame.body {
                logger.debug("hello", metadata: ["client": "\(hello.clientName)", "role": "\(hello.role)"])
            }
            let accepted = HelloAccepted(
                version: .current, nodeID: engine.nodeID.value, clusterID: engine.clusterID,
                serverVersion: RegistryEngine.serverVersion, limits: engine.limits)
            write(context: context, [ServerFrame(requestID: frame.requestID, body: .helloAccepted(accepted))])
        case .dispatch:
            batch.append(frame)
        case .failConnection(let error):
            failConnection(context: context, requestID: frame.requestID, error)
        case .ignore:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !batch.isEmpty {
            let frames = batch
            batch = []
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            engine.submit(frames, resolver: &resolver) { answers in
                if loop.inEventLoop {
                    bound.value.deliver(answers.frames)
                } else {
                    loop.execute { bound.value.deliver(answers.frames) }
                }
            }
        }
        context.flush()
    }

    /// Writes answers from the engine and updates backpressure.
    private func deliver(_ responses: [ServerFrame]) {
        guard let context else { return }
        write(context: context, responses)
        context.flush()
        let (resumeRead, close) = machine.answered(responses.count)
        if resumeRead { context.read() }
        if close { context.close(promise: nil) }
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
        if machine.readRequested() == .read { context.read() }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case let frameError as FrameError:
            if case .tooLarge = frameError {
                failConnection(context: context, requestID: 0, WireError(code: .frameTooLarge, message: frameError.description))
            } else {
                logger.info("connection closed mid-frame", metadata: ["error": "\(frameError)"])
                engine.counters.record(error: .malformedFrame)
                context.close(promise: nil)
            }
        default:
            logger.debug("connection error", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
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
        var buffer = context.channel.allocator.buffer(capacity: 128)
        try? ServerFrame(requestID: requestID, body: .error(error)).encodeFrame(into: &buffer)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
