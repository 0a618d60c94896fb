import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A TCP relay on loopback between two nodes, which a test can cut (every connection through it
/// closed, new ones closed as they arrive) and heal: a network partition without touching the
/// node. Peers name the relay's port instead of the node's. With `terminatingTLS`, it is a relay
/// in the middle that holds a certificate the nodes trust: it ends each side's TLS and relays
/// the plaintext.
final class CuttableProxy: Sendable {
    private let server: any Channel
    private let links = Links()
    var port: Int { server.localAddress?.port ?? 0 }

    init(toPort target: Int, terminatingTLS tls: (server: NIOSSLContext, client: NIOSSLContext)? = nil) throws {
        let links = self.links
        server = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                if links.state.withLock({ $0.cut }) { return inbound.close() }
                let outbound = ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.eventLoop.makeCompletedFuture {
                            if let tls { try outbound.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls.client, serverHostname: nil)) }
                            try outbound.pipeline.syncOperations.addHandler(Relay(to: outbound.eventLoop.makeSucceededFuture(inbound)))
                        }
                    }
                    .connect(host: "127.0.0.1", port: target)
                // A cut that came while this connection was being made closes it here: cut() closed
                // only the connections open then (a CI run saw a "cut" relay carry a link).
                outbound.whenSuccess { outbound in
                    let cut = links.state.withLock { state in
                        if !state.cut { state.open += [inbound, outbound] }
                        return state.cut
                    }
                    if cut {
                        inbound.close(promise: nil)
                        outbound.close(promise: nil)
                    }
                }
                outbound.whenFailure { _ in inbound.close(promise: nil) }
                return inbound.eventLoop.makeCompletedFuture {
                    if let tls { try inbound.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.server)) }
                    try inbound.pipeline.syncOperations.addHandler(Relay(to: outbound))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    /// Closes every connection through the relay, and every new one, until ``heal()``.
    func cut() {
        let open = links.state.withLock { state -> [any Channel] in
            state.cut = true
            defer { state.open = [] }
            return state.open
        }
        // Closed before returning: a relay still open for a moment after the cut went on
        // forwarding a replication batch (CI rehearsal: node-b held node-a's bind made after it).
        for channel in open { try? channel.close().wait() }
    }

    func heal() {
        links.state.withLock { $0.cut = false }
    }

    func close() {
        cut()
        server.close(promise: nil)
    }
}

/// Whether a ``CuttableProxy`` is cut, and the connections through it.
private final class Links: Sendable {
    let state = Mutex<(cut: Bool, open: [any Channel])>((false, []))
}

/// Writes what one side reads to the other once it is connected (in order: callbacks of one
/// future run in the order they were added), and closes the other when this one closes.
private final class Relay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let partner: EventLoopFuture<any Channel>

    init(to partner: EventLoopFuture<any Channel>) {
        self.partner = partner
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        partner.whenSuccess { $0.writeAndFlush(bytes, promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner.whenSuccess { $0.close(promise: nil) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
