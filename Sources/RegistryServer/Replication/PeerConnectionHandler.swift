import Logging
import NIOCore
import RegistryCore
import RegistryWire

/// Serves the receiving side of one peer connection, after ``ConnectionHandler`` accepted its
/// peer hello: cuts frames, feeds ``PeerSessionStateMachine``, hands batches to the engine
/// (``RegistryEngine/submitRemote(_:deliver:)``), and acknowledges each once it is durable.
///
/// At most ``maxBatchesInFlight`` batches wait for the engine at once, and none is taken while
/// its acknowledgements cannot be written; beyond that it stops reading (``RequestFlowControl``,
/// as a client's connection does), so a fast sender is held back by TCP rather than by this
/// node's memory. It sees the channel's reads because it is a duplex handler: an inbound-only
/// one is never asked, and the channel would go on reading.
final class PeerConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    static let maxBatchesInFlight = 4

    private var machine: PeerSessionStateMachine
    private var frames: FrameReader
    private let engine: RegistryEngine
    private var logger: Logger
    /// Batches and snapshot chunks taken and not yet acknowledged, and the read held meanwhile.
    private var flow = RequestFlowControl(maxInFlight: maxBatchesInFlight)
    /// Set while ``resume(context:)`` runs: a flush inside it can report a change of writability,
    /// which asks for another pass instead of running one inside it.
    private var resuming = false
    private var resumeAgain = false
    private var context: ChannelHandlerContext?
    /// The snapshot this peer is sending, while it arrives and is installed.
    private var intake: IncomingSnapshot?
    /// The node is stopping: close once nothing waits for the engine.
    private var draining = false
    /// Checks, once a second after the welcome, that the peer was not removed since: a removal
    /// closes the sessions opened before it, as it refuses every hello after it.
    private var membershipCheck: RepeatedTask?
    /// Refuses the peer if its hello has not arrived in time (``ConnectionDeadlines/hello``, from
    /// now).
    private var helloWatch: Scheduled<Void>?

    /// `challenge` is the one this node's HelloAccepted sent, which the peer's hello must sign.
    /// `binding` is the connection's ``ChannelBinding``, empty without TLS.
    init(engine: RegistryEngine, logger: Logger, alreadyRead: ByteBuffer, challenge: UInt64, binding: [UInt8] = []) {
        self.engine = engine
        self.logger = logger
        self.frames = FrameReader(maxFrameBytes: Int(engine.limits.maxFrameBytes), alreadyRead: alreadyRead)
        self.machine = PeerSessionStateMachine(
            identity: engine.peerIdentity, challenge: challenge, maxBatchOperations: PeerLink.maxBatchOperations,
            removed: Set(engine.members.filter(\.value.removed).keys))
        self.machine.binding = binding
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        engine.counters.connectionOpened()
        engine.counters.connection(role: "peer", by: 1)
        flow.writabilityChanged(writable: context.channel.isWritable)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        helloWatch = context.eventLoop.scheduleTask(in: ConnectionDeadlines.hello) {
            let handler = bound.value
            guard let context = handler.context, handler.machine.state == .awaitingHello else { return }
            handler.refuse(
                WireError(
                    code: .handshakeRequired,
                    message: "no peer hello within \(ConnectionDeadlines.helloSeconds) s of the hello's answer"),
                context: context)
        }
        takeFrames(context: context)
        context.flush()
        // The client handler may have held the read that would have brought the next bytes.
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        membershipCheck?.cancel()
        membershipCheck = nil
        helloWatch?.cancel()
        helloWatch = nil
        intake?.abandon()
        intake = nil
        engine.counters.connectionClosed()
        engine.counters.connection(role: "peer", by: -1)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A session that ended takes nothing more: its bytes are dropped, not buffered, while the
        // refusal's write waits for a peer that may never read it.
        guard machine.state != .closed else { return }
        var bytes = unwrapInboundIn(data)
        frames.append(&bytes)
        takeFrames(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func read(context: ChannelHandlerContext) {
        if flow.readRequested(open: !draining && machine.state != .closed) { context.read() }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        flow.writabilityChanged(writable: context.channel.isWritable)
        if context.channel.isWritable { resume(context: context) }
        context.fireChannelWritabilityChanged()
    }

    /// A stopping node closes a peer's connection once the batches it took are acknowledged; the
    /// sender reconnects to it, or to whoever serves its address next.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is DrainConnectionEvent {
            draining = true
            closeIfDrained(context: context)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func closeIfDrained(context: ChannelHandlerContext) {
        guard draining, flow.inFlight == 0 else { return }
        context.flush()
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("peer connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    private func takeFrames(context: ChannelHandlerContext) {
        while !draining, machine.state != .closed, flow.admits {
            let payload: ByteBuffer?
            do {
                payload = try frames.next()
            } catch {
                return refuse(WireError(code: .frameTooLarge, message: error.description), context: context)
            }
            guard let payload else { break }
            let action: PeerSessionStateMachine.Action
            do {
                action = try machine.received(payload: payload)
            } catch {
                return refuse(WireError(code: .malformedFrame, message: error.description), context: context)
            }
            handle(action, context: context)
        }
        frames.compact()
    }

    private func handle(_ action: PeerSessionStateMachine.Action, context: ChannelHandlerContext) {
        switch action {
        case .welcome(let peer, let peerChallenge):
            logger[metadataKey: "peer_node"] = "\(peer)"
            logger.info("peer connected", metadata: ["bound_to_tls": "\(!machine.binding.isEmpty)"])
            // A node started alone becomes a member once a peer joins through it.
            engine.membership.joinCluster()
            write(.welcome(welcome(signing: peerChallenge)), context: context)
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            membershipCheck = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [engine] task in
                guard engine.members[peer]?.removed == true else { return }
                task.cancel()
                guard let context = bound.value.context else { return }
                bound.value.refuse(PeerSessionStateMachine.removedRefusal(of: peer), context: context)
            }
        case .welcomeThenRefuse(_, let peerChallenge, let refusal):
            write(.welcome(welcome(signing: peerChallenge)), context: context)
            refuse(refusal, context: context)
        case .close:
            context.close(promise: nil)
        case .apply(let batchID, let operations):
            if let holdings = machine.holdingsBeforeFirstBatch(), case .streaming(let peer) = machine.state {
                engine.sizeIndexes(toCatchUpWith: peer, holding: holdings)
            }
            flow.took()
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            engine.submitRemote(operations) { result in
                loop.execute { bound.value.finished(batchID, result) }
            }
        case .storeChunk(let chunk, let starts, let last):
            store(chunk, starts: starts, last: last, context: context)
        case .refuse(let error):
            refuse(error, context: context)
        case .ignore:
            break
        }
    }

    /// Writes a snapshot chunk and acknowledges it; after the last, installs the snapshot and
    /// acknowledges that. Each counts as a batch in flight, so a fast sender is held back here too.
    private func store(_ chunk: SnapshotChunk, starts: Bool, last: Bool, context: ChannelHandlerContext) {
        if starts {
            intake?.abandon()
            intake = IncomingSnapshot.begin(engine: engine)
            guard intake != nil else {
                return refuse(
                    RegistryEngine.snapshotRefused("another peer's snapshot is being installed; send it again later", retryable: true),
                    context: context)
            }
            logger.info("receiving a snapshot from the peer", metadata: ["bytes": "\(chunk.totalBytes)"])
        }
        guard let intake else { return }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        let received = chunk.offset + UInt64(chunk.data.count)
        flow.took()
        intake.write(chunk) { failure in
            loop.execute { bound.value.finished(SnapshotAck(transferID: chunk.transferID, receivedBytes: received), failure) }
        }
        guard last else { return }
        flow.took()
        intake.finish { outcome in
            loop.execute {
                switch outcome {
                case .success(let held):
                    bound.value.finished(
                        SnapshotAck(transferID: chunk.transferID, receivedBytes: received, installed: true, held: held.positions), nil)
                case .failure(let error):
                    bound.value.finished(SnapshotAck(transferID: chunk.transferID, receivedBytes: received), error)
                }
            }
        }
        self.intake = nil
    }

    private func finished(_ ack: SnapshotAck, _ failure: WireError?) {
        flow.answered(1)
        guard let context else { return }
        if let failure {
            if case .refuse(let refusal) = machine.refused(failure) { refuse(refusal, context: context) }
            return
        }
        if ack.installed { logger.info("installed the peer's snapshot") }
        write(.snapshotAck(ack), context: context)
        resume(context: context)
    }

    private func finished(_ batchID: UInt64, _ result: Result<[LogPosition], WireError>) {
        flow.answered(1)
        guard let context else { return }
        switch result {
        case .success(let held):
            write(.ack(BatchAck(batchID: batchID, held: held)), context: context)
        case .failure(let error):
            if case .refuse(let refusal) = machine.refused(error) { refuse(refusal, context: context) }
            return
        }
        resume(context: context)
    }

    /// An answer went out, or the channel became writable: takes the frames that waited, and
    /// reads again if reading was held.
    private func resume(context: ChannelHandlerContext) {
        if resuming {
            resumeAgain = true
            return
        }
        resuming = true
        repeat {
            resumeAgain = false
            context.flush()
            if draining {
                resuming = false
                return closeIfDrained(context: context)
            }
            takeFrames(context: context)
            context.flush()
        } while resumeAgain
        resuming = false
        // A session that ended reads nothing more (``read(context:)`` holds it too).
        if machine.state != .closed, flow.takeHeldRead() { context.read() }
    }

    /// This node's welcome, signing the peer's `challenge` over this connection.
    private func welcome(signing challenge: UInt64) -> PeerWelcome {
        engine.peerIdentity.welcome(
            holding: engine.durableVector, challenge: challenge, maxBatchOperations: PeerLink.maxBatchOperations, binding: machine.binding)
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
        context.writeRefusalAndClose(buffer)
    }
}
