import NIOCore
import NIOEmbedded
import RegistryWire
import Testing
@testable import RegistryClient

/// A watch gives up a node that sends nothing, not even progress, for its idle timeout while the
/// caller waits for frames; the clock runs only while the caller waits, so a caller that is slow
/// to ask (holding the node back through TCP) is not taken for a silent node.
@Suite struct WatchIdleDeadlineTests {
    private func connected(idle: TimeAmount) throws -> (EmbeddedChannel, WatchFrameHandler) {
        let handler = WatchFrameHandler(idleTimeout: idle)
        let channel = EmbeddedChannel(handler: handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, handler)
    }

    /// The payload of a progress frame (no events, a cursor), its length prefix stripped.
    private func progress(_ sequence: UInt64) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        let cursor = WatchCursor(clusterID: "cluster-t", positions: [LogPosition(origin: "node-a", epoch: 1, sequence: sequence)])
        try ServerFrame(requestID: 1, body: .watchEvents(WatchEventsMessage(events: [], cursor: cursor))).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        return buffer
    }

    @Test func progressInTimeKeepsTheConnectionAndSilenceEndsIt() throws {
        let (channel, handler) = try connected(idle: .seconds(10))
        let first = handler.nextFrames()
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try channel.writeInbound(try progress(1))
        #expect(try first.wait()?.count == 1)
        // Waiting again starts the clock again: 9 s more is still in time.
        let second = handler.nextFrames()
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(channel.isActive)
        try channel.writeInbound(try progress(2))
        #expect(try second.wait()?.count == 1)
        let third = handler.nextFrames()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(9_999))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
        // A connection still open would leave the wait below unanswered.
        guard !channel.isActive else { return }
        #expect {
            _ = try third.wait()
        } throws: { error in
            "\(error)".contains("the node sent nothing for 10000 ms, not even progress")
        }
    }

    @Test func aCallerThatDoesNotAskStopsTheClock() throws {
        let (channel, handler) = try connected(idle: .seconds(10))
        let first = handler.nextFrames()
        try channel.writeInbound(try progress(1))
        #expect(try first.wait()?.count == 1)
        // The caller is busy for a minute: nothing is read, and the node is not blamed.
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        let second = handler.nextFrames()
        try channel.writeInbound(try progress(2))
        #expect(try second.wait()?.count == 1)
        _ = try? channel.finish()
    }
    /// The payload of a hello's answer whose limits say the node's progress interval.
    private func helloAccepted(progressMillis: UInt32) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        var limits = Limits.default
        limits.watchProgressMillis = progressMillis
        let accepted = HelloAccepted(version: .current, nodeID: "node-a", clusterID: "cluster-t", serverVersion: "t", limits: limits)
        try ServerFrame(requestID: 0, body: .helloAccepted(accepted)).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        return buffer
    }

    /// A watch connection with a 10 s idle timeout whose node answered the hello saying it sends
    /// progress every `progressMillis`.
    private func answered(progressMillis: UInt32) throws -> (EmbeddedChannel, WatchFrameHandler) {
        let (channel, handler) = try connected(idle: .seconds(10))
        handler.awaitAnswer(within: .seconds(5))
        let answer = handler.nextFrames()
        try channel.writeInbound(try helloAccepted(progressMillis: progressMillis))
        #expect(try answer.wait()?.count == 1)
        return (channel, handler)
    }

    /// A node that says it sends progress every 20 s is given three of them (60 s) by a watch
    /// whose idle timeout is 10 s; one that says less than a third of the timeout changes nothing.
    @Test func aNodeThatSaysItSendsProgressSeldomIsGivenThreeIntervals() throws {
        let (channel, handler) = try answered(progressMillis: 20_000)
        #expect(handler.idleTimeout == .seconds(60))
        let quiet = handler.nextFrames()
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(channel.isActive, "given up before three of the node's progress intervals")
        try channel.writeInbound(try progress(1))
        #expect(try quiet.wait()?.count == 1)
        _ = try? channel.finish()

        let (other, otherHandler) = try answered(progressMillis: 1_000)
        #expect(otherHandler.idleTimeout == .seconds(10))
        _ = try? other.finish()
    }

    /// While the hello's answer is due, its own deadline counts, not the idle timeout.
    @Test func theHellosAnswerHasItsOwnDeadline() throws {
        let (channel, handler) = try connected(idle: .milliseconds(100))
        handler.awaitAnswer(within: .seconds(10))
        let answer = handler.nextFrames()
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive, "the idle timeout cut the hello off")
        try channel.writeInbound(try progress(1))
        #expect(try answer.wait()?.count == 1)
        _ = try? channel.finish()
    }
}
