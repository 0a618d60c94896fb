import NIOCore
import RegistryWire

/// Stands in for ``ConnectionHandler`` on a connection past `--max-connections`: it answers at
/// once, before the hello, with a retryable `TOO_MANY_CONNECTIONS` as a connection-level error
/// (request ID 0, which clients take for the hello's answer), reads nothing, and closes
/// (``ChannelHandlerContext/writeRefusalAndClose(_:)``). With TLS the refusal goes once the
/// handshake is done, or the connection closes after ``ConnectionDeadlines/refusalWrite``.
final class ConnectionLimitRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    /// The node's `--max-connections`, for the message.
    let limit: Int
    private var refused = false

    init(limit: Int) {
        self.limit = limit
    }

    /// The refusal a connection past `limit` connections is sent.
    static func refusal(limit: Int) -> WireError {
        WireError(
            code: .tooManyConnections,
            message: "this node holds \(limit) connections, its --max-connections; try again later or another node",
            retryable: true)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { refuse(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        refuse(context: context)
        context.fireChannelActive()
    }

    /// What the client sends meanwhile is dropped.
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func refuse(context: ChannelHandlerContext) {
        guard !refused else { return }
        refused = true
        var buffer = context.channel.allocator.buffer(capacity: 160)
        try? ServerFrame(requestID: 0, body: .error(Self.refusal(limit: limit))).encodeFrame(into: &buffer)
        context.writeRefusalAndClose(buffer)
    }
}
