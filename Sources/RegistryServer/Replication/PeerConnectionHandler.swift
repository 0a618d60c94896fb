import Logging
import NIOCore
import RegistryCore
import RegistryWire

/// Serves the receiving side of one peer connection, after ``ConnectionHandler`` accepted its
/// peer hello: cuts frames, feeds ``PeerSessionStateMachine``, hands batches to the engine
/// (``RegistryEngine/submitRemote(_:deliver:)``), and acknowledges each once it is durable.
///
/// At most ``maxBatchesInFlight`` batches wait for the engine at once; beyond that it stops
/// reading, so a fast sender is held back by TCP rather than by this node's memory.
final class PeerConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxBatchesInFlight = 4

    private var machine: PeerSessionStateMachine
    private var unread: ByteBuffer
    private let frames: FrameDecoder
    private let engine: RegistryEngine
    private var logger: Logger
    private var batchesInFlight = 0
    private var readHeld = false
    private var context: ChannelHandlerContext?

    init(engine: RegistryEngine, logger: Logger, alreadyRead: ByteBuffer) {
        self.engine = engine
        self.logger = logger
        self.unread = alreadyRead
        self.frames = FrameDecoder(maxFrameBytes: Int(engine.limits.maxFrameBytes))
        self.machine = PeerSessionStateMachine(
            identity: engine.peerIdentity, maxBatchOperations: PeerLink.maxBatchOperations,
            removed: Set(engine.members.filter(\.value.removed).keys))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        engine.counters.connectionOpened()
        takeFrames(context: context)
        context.flush()
        // The client handler may have held the read that would have brought the next bytes.
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        engine.counters.connectionClosed()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        unread.writeBuffer(&bytes)
        takeFrames(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func read(context: ChannelHandlerContext) {
        if batchesInFlight >= Self.maxBatchesInFlight {
            readHeld = true
        } else {
            context.read()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("peer connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func takeFrames(context: ChannelHandlerContext) {
        while machine.state != .closed, batchesInFlight < Self.maxBatchesInFlight {
            let payload: ByteBuffer?
            do {
                payload = try frames.nextFrame(&unread)
            } catch {
                return refuse(WireError(code: .frameTooLarge, message: error.description), context: context)
            }
            guard let payload else { break }
            let frame: PeerFrame
            do {
                frame = try PeerFrame(decoding: payload)
            } catch {
                return refuse(WireError(code: .malformedFrame, message: error.description), context: context)
            }
            handle(machine.received(frame), context: context)
        }
        if unread.readableBytes == 0 { unread.clear() } else if unread.readerIndex > 1 << 16 { unread.discardReadBytes() }
    }

    private func handle(_ action: PeerSessionStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .welcome(let peer):
            logger[metadataKey: "peer_node"] = "\(peer)"
            logger.info("peer connected")
            // A node started alone becomes a member once a peer joins through it.
            engine.joinCluster()
            let welcome = PeerWelcome(
                nodeID: engine.nodeID.value, epoch: engine.peerIdentity.epoch, versionVector: engine.durableVector.positions,
                maxBatchOperations: UInt32(PeerLink.maxBatchOperations))
            write(.welcome(welcome), context: context)
        case .apply(let batchID, let operations):
            batchesInFlight += 1
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            engine.submitRemote(operations) { result in
                loop.execute { bound.value.finished(batchID, result) }
            }
        case .refuse(let error):
            refuse(error, context: context)
        case .ignore:
            break
        }
    }

    private func finished(_ batchID: UInt64, _ result: Result<[LogPosition], WireError>) {
        batchesInFlight -= 1
        guard let context else { return }
        switch result {
        case .success(let held):
            write(.ack(BatchAck(batchID: batchID, held: held)), context: context)
            context.flush()
        case .failure(let error):
            if case .refuse(let refusal) = machine.refused(error) { refuse(refusal, context: context) }
            return
        }
        takeFrames(context: context)
        context.flush()
        if readHeld, batchesInFlight < Self.maxBatchesInFlight {
            readHeld = false
            context.read()
        }
    }

    private func write(_ frame: PeerFrame, context: ChannelHandlerContext) {
        var buffer = context.channel.allocator.buffer(capacity: 256)
        do {
            try frame.encodeFrame(into: &buffer)
        } catch {
            logger.error("cannot encode a peer frame", metadata: ["error": "\(error)"])
            return
        }
        context.write(wrapOutboundOut(buffer), promise: nil)
    }

    private func refuse(_ error: WireError, context: ChannelHandlerContext) {
        _ = machine.refused(error)
        logger.warning("refusing a peer", metadata: ["error": "\(error)"])
        engine.counters.record(error: error.code)
        var buffer = context.channel.allocator.buffer(capacity: 256)
        try? PeerFrame.refusal(error).encodeFrame(into: &buffer)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
