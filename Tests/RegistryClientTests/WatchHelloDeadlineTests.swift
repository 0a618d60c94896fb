import NIOCore
import NIOEmbedded
import RegistryWire
import Testing
@testable import RegistryClient

/// The deadline for a node's answer to a watch's hello, on an embedded channel whose clock the
/// test moves: it is kept from the network's side, so an answer that came in time waits for a
/// caller that comes for it late, and only a node that sent nothing is given up.
@Suite struct WatchHelloDeadlineTests {
    /// A connected channel with the watch's frame handler alone (the payloads the test writes are
    /// what the frame decoder before it would hand on).
    private func connected() throws -> (EmbeddedChannel, WatchFrameHandler) {
        let handler = WatchFrameHandler()
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, handler)
    }

    /// The payload of a node's `HelloAccepted`, its length prefix stripped.
    private func helloAccepted() throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try ServerFrame(
            requestID: 0,
            body: .helloAccepted(HelloAccepted(version: .current, nodeID: "node-a", clusterID: "cluster-t", serverVersion: "test", limits: .default))
        ).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        return buffer
    }

    @Test func anAnswerThatCameInTimeIsKeptForACallerThatTakesItLate() throws {
        let (channel, handler) = try connected()
        handler.awaitAnswer(within: .milliseconds(300))
        try channel.writeInbound(try helloAccepted())
        // The caller's task comes for the answer long after the deadline would have passed.
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        let frames = try #require(try handler.nextFrames().wait())
        guard frames.count == 1, case .helloAccepted(let accepted) = frames[0].body else { return #expect(Bool(false), "\(frames)") }
        #expect(accepted.nodeID == "node-a")
        _ = try? channel.finish()
    }

    @Test func aNodeThatSendsNothingIsGivenUpOnceTheTimeoutPasses() throws {
        let (channel, handler) = try connected()
        handler.awaitAnswer(within: .milliseconds(300))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(299))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
        #expect {
            _ = try handler.nextFrames().wait()
        } throws: { error in
            "\(error)".contains("before the hello was answered: no answer within 300 ms")
        }
    }
}
