import NIOCore
import NIOEmbedded
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// What a connection that proves nothing may hold, and for how long: a connection with no hello
/// is refused at ``ConnectionDeadlines/hello`` (a peer's at the same deadline after its
/// client hello), and a refused connection reads nothing more and closes after
/// ``ConnectionDeadlines/refusalWrite`` even when the client never reads the refusal.
/// Before, each could hold its socket and a buffer of up to a frame's size for good.
@Suite struct ConnectionDeadlineTests: EngineTesting {
    /// Holds every write's promise, as a socket whose peer does not read holds the write.
    final class WriteHolder: ChannelOutboundHandler, @unchecked Sendable {
        // @unchecked Sendable: touched only on the embedded channel's loop, the test's thread.
        typealias OutboundIn = ByteBuffer
        private(set) var held: [ByteBuffer] = []

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            held.append(unwrapOutboundIn(data))
        }
    }

    /// The server frames in `buffers`, in order.
    static func frames(_ buffers: [ByteBuffer]) throws -> [ServerFrame] {
        var reader = FrameReader(maxFrameBytes: 1 << 20)
        var frames = [ServerFrame]()
        for var buffer in buffers {
            reader.append(&buffer)
            while let payload = try reader.next() { frames.append(try ServerFrame(decoding: payload)) }
        }
        return frames
    }

    static func outbound(_ channel: EmbeddedChannel) throws -> [ByteBuffer] {
        var buffers = [ByteBuffer]()
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { buffers.append(buffer) }
        return buffers
    }

    /// A frame's first bytes only: its length prefix says 100 bytes, and 10 follow.
    static var partialFrame: ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(100))
        buffer.writeBytes([UInt8](repeating: 7, count: 10))
        return buffer
    }

    /// Runs `body` with an engine on a fresh data directory, closed and removed after.
    func withEngine(_ body: (RegistryEngine) throws -> Void) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let engine = try open(dir.path)
        defer { engine.close() }
        try body(engine)
    }

    /// An embedded channel with `handlers`, in order, connected.
    static func connected(_ handlers: [any ChannelHandler]) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        for handler in handlers { try channel.pipeline.syncOperations.addHandler(handler) }
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7400)).wait()
        return channel
    }

    @Test func aConnectionThatSaysNoHelloIsRefusedAtTheDeadline() throws {
        try withEngine { engine in
            let channel = try Self.connected([ConnectionHandler(engine: engine, logger: .quiet())])
            try channel.writeInbound(Self.partialFrame)
            channel.embeddedEventLoop.advanceTime(by: ConnectionDeadlines.hello - .milliseconds(1))
            #expect(channel.isActive, "the deadline has not passed")
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            let answers = try Self.frames(Self.outbound(channel))
            guard case .error(let error) = answers.first?.body else {
                Issue.record("expected a refusal, got \(answers)")
                return
            }
            #expect(error.code == .handshakeRequired)
            #expect(!channel.isActive, "the connection must close at the deadline")
        }
    }

    @Test func aConnectionThatSaidHelloHasNoDeadline() throws {
        try withEngine { engine in
            let channel = try Self.connected([ConnectionHandler(engine: engine, logger: .quiet())])
            var hello = ByteBuffer()
            try ClientFrame(requestID: 1, body: .hello(Hello(role: .client, clientName: "test"))).encodeFrame(into: &hello)
            try channel.writeInbound(hello)
            channel.embeddedEventLoop.advanceTime(by: ConnectionDeadlines.hello * 3)
            #expect(channel.isActive, "an idle client that said hello stays connected")
            let answers = try Self.frames(Self.outbound(channel))
            guard case .helloAccepted = answers.first?.body, answers.count == 1 else {
                Issue.record("expected the hello's answer alone, got \(answers)")
                return
            }
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
    }

    /// A client that does not read its refusal (here a watch refused for another cluster's
    /// cursor): while the write waits, the connection reads nothing more (it read on, buffering
    /// what came), and it closes after the refusal's timeout.
    @Test func aRefusedConnectionReadsNothingMoreAndClosesWhenItsRefusalIsNotRead() throws {
        try withEngine { engine in
            let (counter, holder) = (ReadCounter(), WriteHolder())
            let channel = try Self.connected([counter, holder, ConnectionHandler(engine: engine, logger: .quiet())])
            var requests = ByteBuffer()
            try ClientFrame(requestID: 1, body: .hello(Hello(role: .client, clientName: "test"))).encodeFrame(into: &requests)
            try ClientFrame(requestID: 2, body: .watch(WatchRequestMessage(cursor: try WatchCursor(text: "theirs@")))).encodeFrame(into: &requests)
            try channel.writeInbound(requests)
            let answers = try Self.frames(holder.held)
            guard answers.count == 2, case .helloAccepted = answers[0].body, case .error(let error) = answers[1].body else {
                Issue.record("expected the hello's answer and a refusal, got \(answers)")
                return
            }
            #expect(error.code == .invalidCursor)
            #expect(channel.isActive, "the refusal's write is held")
            let reads = counter.reads.load(ordering: .relaxed)
            channel.pipeline.read()
            #expect(counter.reads.load(ordering: .relaxed) == reads, "a refused connection reads nothing more")
            channel.embeddedEventLoop.advanceTime(by: ConnectionDeadlines.refusalWrite)
            #expect(!channel.isActive, "the connection must close though its refusal was not read")
        }
    }

    /// A peer that never sends its PeerHello after the client hello's answer is refused at the
    /// same deadline.
    @Test func aPeerThatSendsNoPeerHelloIsRefusedAtTheDeadline() throws {
        try withEngine { engine in
            let channel = try Self.connected([])
            try channel.pipeline.syncOperations.addHandler(
                PeerConnectionHandler(engine: engine, logger: .quiet(), alreadyRead: Self.partialFrame, challenge: 1))
            channel.embeddedEventLoop.advanceTime(by: ConnectionDeadlines.hello - .milliseconds(1))
            #expect(channel.isActive, "the deadline has not passed")
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
            var reader = FrameReader(maxFrameBytes: 1 << 20)
            var refusals = [WireError]()
            for var buffer in try Self.outbound(channel) {
                reader.append(&buffer)
                while let payload = try reader.next() {
                    if case .refusal(let error) = try PeerFrame(decoding: payload) { refusals.append(error) }
                }
            }
            #expect(refusals.map(\.code) == [.handshakeRequired])
            #expect(!channel.isActive, "the connection must close at the deadline")
        }
    }
}
