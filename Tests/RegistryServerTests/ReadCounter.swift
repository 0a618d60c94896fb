import NIOCore
import Synchronization

/// Counts the reads that reach the channel's head, as the socket would receive them: for tests
/// of handlers that hold reads back.
final class ReadCounter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = ByteBuffer
    let reads = Atomic<Int>(0)

    func read(context: ChannelHandlerContext) {
        reads.add(1, ordering: .relaxed)
        context.read()
    }
}
