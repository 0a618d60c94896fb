import NIOCore
import NIOPosix
import RegistryWire

/// One connection that watches: frames are read from the socket only when the caller asks for
/// the next one (the channel does not read on its own), so a caller that does not keep up holds
/// the node back through TCP instead of piling frames up in memory.
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
        group: any EventLoopGroup, connectTimeout: TimeAmount
    ) async throws(RegistryClientError) -> (WatchConnection, HelloAccepted) {
        let connection: WatchConnection
        do {
            connection = try await ClientBootstrap(group: group)
                .connectTimeout(connectTimeout)
                .channelOption(.autoRead, value: false)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(try tls.handler(for: endpoint.host)) }
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FrameDecoder(maxFrameBytes: 64 << 20)))
                        try channel.pipeline.syncOperations.addHandler(WatchFrameHandler())
                    }
                }
                .connect(host: endpoint.host, port: endpoint.port)
                .flatMapThrowing { channel in
                    let handler = try channel.pipeline.syncOperations.handler(type: WatchFrameHandler.self)
                    return WatchConnection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop))
                }.get()
        } catch {
            throw .unreachable(endpoint: endpoint.description, reason: "\(error)")
        }
        do {
            try await connection.send(ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: clientName, token: token ?? ""))))
            guard let first = try await connection.next() else { throw RegistryClientError.connectionClosed("before the hello was answered") }
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

    /// The next frame the node sent; nil once the connection closed.
    func next() async throws -> ServerFrame? {
        try await channel.eventLoop.flatSubmit { [handler] in handler.value.next() }.get()
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Cuts nothing itself (a `FrameDecoder` before it does): decodes frames and hands each to the
/// one caller waiting, reading from the socket only while one waits.
private final class WatchFrameHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var context: ChannelHandlerContext?
    private var frames: CircularBuffer<ServerFrame> = []
    private var waiting: EventLoopPromise<ServerFrame?>?
    private var ended: (any Error)??

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    /// The next frame, read from the socket when none is buffered.
    func next() -> EventLoopFuture<ServerFrame?> {
        guard let context else { return MultiThreadedEventLoopGroup.singleton.any().makeSucceededFuture(nil) }
        if let frame = frames.popFirst() { return context.eventLoop.makeSucceededFuture(frame) }
        if let ended {
            if let error = ended { return context.eventLoop.makeFailedFuture(error) }
            return context.eventLoop.makeSucceededFuture(nil)
        }
        let promise = context.eventLoop.makePromise(of: ServerFrame?.self)
        waiting = promise
        context.read()
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let payload = unwrapInboundIn(data)
        do {
            deliver(try ServerFrame(decoding: payload))
        } catch {
            end(RegistryClientError.unexpectedResponse("a frame that does not decode: \(error)"))
            context.close(promise: nil)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A read that brought no whole frame: read on for the caller still waiting.
        if waiting != nil { context.read() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end(nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end(RegistryClientError.connectionClosed("\(error)"))
        context.close(promise: nil)
    }

    private func deliver(_ frame: ServerFrame) {
        if let promise = waiting {
            waiting = nil
            promise.succeed(frame)
        } else {
            frames.append(frame)
        }
    }

    private func end(_ error: (any Error)?) {
        guard ended == nil else { return }
        ended = .some(error)
        if let promise = waiting {
            waiting = nil
            if let error { promise.fail(error) } else { promise.succeed(nil) }
        }
    }
}
