import NIOCore

/// What a connection that proves nothing may hold, and for how long, client's and peer's alike.
enum ConnectionDeadlines {
    /// How long a new connection may take to send its hello (TLS handshake included), and a
    /// peer's its PeerHello after the hello's answer, before it is refused and closed: otherwise
    /// a connection that never says hello, or stops inside its first frame, holds its socket and
    /// buffer for good without proving anything.
    static let hello = TimeAmount.seconds(10)
    /// How long a refusal's write may wait for a client or peer that does not read it before
    /// the connection closes anyway.
    static let refusalWrite = TimeAmount.seconds(1)

    /// ``hello`` in whole seconds, for messages.
    static var helloSeconds: Int64 { hello.nanoseconds / 1_000_000_000 }
}

extension ChannelHandlerContext {
    /// Writes `refusal` (a whole frame) and closes the connection once it is written, or after
    /// ``ConnectionDeadlines/refusalWrite`` when the other side does not read it.
    func writeRefusalAndClose(_ refusal: ByteBuffer) {
        let channel = self.channel
        writeAndFlush(NIOAny(refusal)).whenComplete { _ in channel.close(promise: nil) }
        eventLoop.scheduleTask(in: ConnectionDeadlines.refusalWrite) { channel.close(promise: nil) }
    }
}
