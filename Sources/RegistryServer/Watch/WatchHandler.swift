import Logging
import NIOCore
import RegistryCore
import RegistryWire

/// Serves one watch stream (watch.proto) on a connection handed over by ``ConnectionHandler``:
/// opens a reader of the node's feed at the request's cursor, writes what it reads while the
/// channel is writable, and stops reading, not buffering, while it is not (its backlog is the
/// feed). It sleeps while caught up until the feed has more, and sends its cursor after
/// `--watch-progress` without a matching event. What to read and where is ``FeedReader``'s.
final class WatchHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// Events per frame at most.
    static let eventsPerFrame = 256
    /// Reads per turn of the event loop at most, so that a long backlog shares the loop.
    static let readsPerTurn = 16

    private let hub: WatchHub
    private let subscription: WatchSubscription
    private let requestID: UInt64
    private let clusterID: String
    private let progress: TimeAmount
    /// How long to wait for the node to hold a cursor made on a node that is ahead.
    private let catchUpTimeout: TimeAmount
    private let wallClockMillis: @Sendable () -> UInt64
    private let logger: Logger
    private var reader: FeedReader?
    private var context: ChannelHandlerContext?
    private var opened = NIODeadline.now()
    private var lastWrite = NIODeadline.now()
    private var timer: RepeatedTask?
    /// The stream ended (an error was sent, or the connection closed).
    private var finished = false
    private var admitted = false

    init(
        hub: WatchHub, subscription: WatchSubscription, requestID: UInt64, clusterID: String, progressMillis: UInt64,
        catchUpMillis: UInt64, wallClockMillis: @escaping @Sendable () -> UInt64, logger: Logger
    ) {
        self.hub = hub
        self.subscription = subscription
        self.requestID = requestID
        self.clusterID = clusterID
        progress = .milliseconds(Int64(progressMillis))
        catchUpTimeout = .milliseconds(Int64(catchUpMillis))
        self.wallClockMillis = wallClockMillis
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        opened = .now()
        lastWrite = .now()
        guard hub.admit() else {
            return finish(
                WireError(
                    code: .tooManyWatchers, message: "this node serves \(hub.maxWatchers) watchers, its --max-watchers; try again later or another node",
                    retryable: true))
        }
        admitted = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: progress, delay: progress) { _ in bound.value.tick() }
        pump()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finished = true
        timer?.cancel()
        timer = nil
        if admitted { hub.leave(ObjectIdentifier(self)) }
        admitted = false
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        finish(WireError(code: .invalidArgument, message: "this connection watches and takes no other request; open another for requests"))
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { pump() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // A stream has nothing in flight: a draining node ends it at once, and the client goes on
        // elsewhere from its cursor.
        if event is DrainConnectionEvent {
            finish(WireError(code: .unavailable, message: "the node is shutting down; watch on another node from your cursor", retryable: true))
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("watch connection error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }

    /// What wakes this handler on its event loop when the feed has more.
    private func waker() -> @Sendable () -> Void {
        guard let context else { return {} }
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        return { loop.execute { bound.value.pump() } }
    }

    /// Opens the reader when it is not yet, then writes what it reads while the channel takes it.
    private func pump() {
        guard let context, !finished else { return }
        if let expiresAt = subscription.expiresAt, wallClockMillis() / 1_000 >= expiresAt {
            return finish(WireError(code: .unauthenticated, message: "the token expired; watch again with a new one"))
        }
        if reader == nil, !open() { return }
        var rounds = 0
        while context.channel.isWritable, rounds < Self.readsPerTurn {
            rounds += 1
            let read: (scan: FeedScan, runs: [ByteBuffer], bytes: Int, caughtUp: Bool)
            do {
                read = try hub.read(&reader!, limit: Self.eventsPerFrame, id: ObjectIdentifier(self), wake: waker())
            } catch {
                return finish(expired(error, why: "the node's feed dropped events this watcher had not read"))
            }
            if !read.runs.isEmpty { write(read.runs, bytes: read.bytes, cursor: read.scan.cursor) }
            if read.caughtUp { break }
        }
        // A long backlog goes on in the next turn of the loop.
        if rounds == Self.readsPerTurn, context.channel.isWritable {
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.execute { bound.value.pump() }
        }
        context.flush()
    }

    /// Opens the reader; false while the node does not hold the cursor yet (it is woken at the
    /// next commit) or when the stream ended.
    private func open() -> Bool {
        do {
            reader = try hub.open(
                after: subscription.cursor, filter: subscription.filter, id: ObjectIdentifier(self), wake: waker())
            // The stream starts with the cursor it starts from, when it has one already.
            if let cursor = reader?.cursor { write([], bytes: 0, cursor: cursor) }
            return true
        } catch .notCaughtUp(let held) {
            if NIODeadline.now() - opened >= catchUpTimeout {
                finish(
                    WireError(
                        code: .notCaughtUp,
                        message: "this node does not hold every operation the cursor names yet (it holds \(held)); try another node",
                        retryable: true))
            }
            return false
        } catch {
            finish(expired(error, why: "the cursor names events this node no longer holds"))
            return false
        }
    }

    /// The progress timer: sends the cursor when nothing was written for a while.
    private func tick() {
        guard let context, !finished else { return }
        pump()
        guard !finished, let reader, let cursor = reader.cursor, NIODeadline.now() - lastWrite >= progress, context.channel.isWritable else {
            return
        }
        write([], bytes: 0, cursor: cursor)
        context.flush()
    }

    /// Writes one frame of `runs` of event fields (the hub's, `bytes` in all) and `cursor`, each
    /// part as it is: the frame's head is the only thing made for this watcher alone.
    private func write(_ runs: [ByteBuffer], bytes: Int, cursor: VersionVector?) {
        guard let context else { return }
        var cursorField: ByteBuffer?
        if let cursor {
            do {
                cursorField = try hub.cursorField(WatchCursor(clusterID: clusterID, vector: cursor))
            } catch {
                return finish(WireError(code: .internalError, message: "cannot encode the watch cursor: \(error)"))
            }
        }
        var head = context.channel.allocator.buffer(capacity: 24)
        WatchFrames.writeHead(requestID: requestID, bodyBytes: bytes + (cursorField?.readableBytes ?? 0), into: &head)
        context.write(wrapOutboundOut(head), promise: nil)
        for run in runs { context.write(wrapOutboundOut(run), promise: nil) }
        if let cursorField { context.write(wrapOutboundOut(cursorField), promise: nil) }
        lastWrite = .now()
    }

    private func expired(_ error: FeedReadError, why: String) -> WireError {
        switch error {
        case .expired(let floor):
            return WireError(
                code: .cursorExpired,
                message: "\(why) (a cursor must hold \(floor.logs.isEmpty ? "nothing" : "\(floor)")): read the state again, and watch from now")
        case .notCaughtUp(let held):
            return WireError(code: .notCaughtUp, message: "this node holds \(held) only", retryable: true)
        }
    }

    /// Ends the stream with `error`, then closes the connection.
    /// The place on the hub is given back at once, and the connection closed once the error is
    /// written, or after a second when a client that stopped reading leaves it unwritten.
    private func finish(_ error: WireError) {
        guard let context, !finished else { return }
        finished = true
        timer?.cancel()
        if admitted { hub.leave(ObjectIdentifier(self)) }
        admitted = false
        var buffer = context.channel.allocator.buffer(capacity: 256)
        try? ServerFrame(requestID: requestID, body: .error(error)).encodeFrame(into: &buffer)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(buffer)).whenComplete { _ in channel.close(promise: nil) }
        context.eventLoop.scheduleTask(in: .seconds(1)) { channel.close(promise: nil) }
    }
}
