import NIOCore
import NIOEmbedded
import RegistryWire
import Synchronization
import Testing
@testable import RegistryClient

/// The client's connection handler on an embedded channel: which registrations share a frame,
/// and what the requests waiting on a connection are told when it ends.
@Suite struct ClientChannelHandlerTests {
    /// Every answer a request got, by the test's number for it.
    final class Answers: Sendable {
        let got = Mutex<[Int: Result<ServerReply, RegistryClientError>]>([:])

        func sink(_ number: Int) -> AnswerSink {
            .callback { result in self.got.withLock { $0[number] = result } }
        }

        subscript(number: Int) -> Result<ServerReply, RegistryClientError>? { got.withLock { $0[number] } }
    }

    func registration(_ index: Int, bundle: String = "com.vendor.app") -> RegisterRequest {
        RegisterRequest(bundleID: bundle, idfv: "00000000-0000-4000-8000-" + String(repeating: "0", count: 11) + String(index))
    }

    /// The frames written to the channel, their length prefixes stripped.
    func written(_ channel: EmbeddedChannel) throws -> [ClientFrame] {
        var frames = [ClientFrame]()
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            guard let length = buffer.readInteger(as: UInt32.self), let payload = buffer.readSlice(length: Int(length)) else {
                Issue.record("a written buffer that is not one whole frame")
                break
            }
            frames.append(try ClientFrame(decoding: payload))
        }
        return frames
    }

    /// Writes `requests` and flushes once, as several tasks writing between two flushes do.
    func send(_ requests: [PendingRequest], on channel: EmbeddedChannel) {
        for request in requests { channel.write(request, promise: nil) }
        channel.flush()
        channel.embeddedEventLoop.run()
    }

    /// A registration carrying a causal token of its own travels alone: coalesced, the frame
    /// carried the tokens of all, and the server held or refused every registration in it for
    /// one caller's token.
    @Test func aRegistrationWithItsOwnTokenTravelsAlone() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 8))
        let answers = Answers()
        let token = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 4)])
        send(
            [
                PendingRequest(body: .register(registration(1)), answer: answers.sink(1)),
                PendingRequest(body: .register(registration(2)), after: token, answer: answers.sink(2)),
                PendingRequest(body: .register(registration(3)), answer: answers.sink(3)),
            ], on: channel)
        let frames = try written(channel)
        #expect(frames.map(\.body) == [.register(registration(1)), .register(registration(2)), .register(registration(3))])
        #expect(frames.map(\.after) == [.empty, token, .empty])
        // Without tokens, they share one frame.
        send((4...6).map { PendingRequest(body: .register(registration($0)), answer: answers.sink($0)) }, on: channel)
        let shared = try written(channel)
        #expect(shared.map(\.body) == [.registerBatch((4...6).map { registration($0) })] && shared[0].after == .empty)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A registration whose text holds a NUL, which the encoder refuses, fails alone: coalesced,
    /// it failed every registration of its frame.
    @Test func aRegistrationTheEncoderRefusesFailsAlone() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 8))
        let answers = Answers()
        send(
            [
                PendingRequest(body: .register(registration(1)), answer: answers.sink(1)),
                PendingRequest(body: .register(registration(2, bundle: "com.vendor.app\u{0}")), answer: answers.sink(2)),
                PendingRequest(body: .register(registration(3)), answer: answers.sink(3)),
            ], on: channel)
        let frames = try written(channel)
        #expect(frames.map(\.body) == [.register(registration(1)), .register(registration(3))])
        guard case .failure(.unexpectedResponse(let reason)) = answers[2] else { return #expect(Bool(false), "\(String(describing: answers[2]))") }
        #expect(reason.contains("cannot encode"))
        #expect(answers[1] == nil && answers[3] == nil, "the others wait for their answers")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A request whose frame is over the limit the server gave in its HelloAccepted fails alone
    /// with FRAME_TOO_LARGE and is not sent: sent, the server ended the connection, and every
    /// other request on it with it. Requests within the limit go on.
    @Test func aFrameOverTheServersLimitFailsAloneWithoutBeingSent() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
        let answers = Answers()
        send([PendingRequest(body: .hello(Hello(role: .client, clientName: "t", token: "")), answer: answers.sink(0))], on: channel)
        let hello = try #require(try written(channel).first)
        let limits = Limits(maxFrameBytes: 512, maxBatchSize: 100, maxInFlight: 64)
        var buffer = channel.allocator.buffer(capacity: 128)
        try ServerFrame(
            requestID: hello.requestID,
            body: .helloAccepted(HelloAccepted(version: .current, nodeID: "node-a", clusterID: "c", serverVersion: "t", limits: limits, instanceID: 1))
        ).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        try channel.writeInbound(buffer)
        #expect(answers[0] != nil)
        let large = RegisterRequest(bundleID: "com.vendor." + String(repeating: "a", count: 600), idfv: "00000000-0000-4000-8000-000000000001")
        send(
            [
                PendingRequest(body: .register(large), answer: answers.sink(1)),
                PendingRequest(body: .register(registration(2)), answer: answers.sink(2)),
            ], on: channel)
        #expect(try written(channel).map(\.body) == [.register(registration(2))])
        guard case .failure(.server(let error)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(error.code == .frameTooLarge && error.message.contains("512"))
        #expect(answers[2] == nil, "the other request waits for its answer")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// An error of the connection's (request ID 0: a frame too large, say) tells every waiting
    /// request that the connection closed, which a caller retries: it was each request's own
    /// typed server error, though the request may have been committed.
    @Test func anErrorOfTheConnectionClosesEveryWaitingRequest() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
        let answers = Answers()
        send([PendingRequest(body: .register(registration(1)), answer: answers.sink(1))], on: channel)
        _ = try written(channel)
        var buffer = channel.allocator.buffer(capacity: 64)
        try ServerFrame(requestID: 0, body: .error(WireError(code: .frameTooLarge, message: "a frame of 2 MiB"))).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        try channel.writeInbound(buffer)
        guard case .failure(.connectionClosed(let reason)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(reason.contains("frame_too_large") || reason.contains("2 MiB"), "\(reason)")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A frame that does not decode ends the connection: the requests waiting on it fail as
    /// `connectionClosed` (their outcome is unknown, as for any connection cut short), saying why;
    /// the connection's failure, which `connect` reports, keeps its kind.
    @Test func aFrameThatDoesNotDecodeClosesEveryWaitingRequestAsACutConnection() throws {
        let failure = ConnectionFailure()
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1, failure: failure))
        let answers = Answers()
        send([PendingRequest(body: .register(registration(1)), answer: answers.sink(1))], on: channel)
        _ = try written(channel)
        var buffer = channel.allocator.buffer(capacity: 8)
        buffer.writeBytes([0xFF, 0xFF, 0xFF, 0xFF])
        try channel.writeInbound(buffer)
        guard case .failure(.connectionClosed(let reason)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(reason.contains("cannot read"), "\(reason)")
        guard case .unexpectedResponse? = failure.recorded else { return #expect(Bool(false), "\(String(describing: failure.recorded))") }
        #expect(RegistryClientError.closedBefore(failure.recorded, write: ChannelError.ioOnClosedChannel) == .connectionClosed(reason))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A connection-level error before the hello's answer (a node at its `--max-connections`
    /// answers so at once) is the hello's refusal, typed as the node sent it.
    @Test func anErrorOfTheConnectionBeforeTheHellosAnswerRefusesTheHello() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
        let answers = Answers()
        send([PendingRequest(body: .hello(Hello(role: .client, clientName: "t", token: "")), answer: answers.sink(1))], on: channel)
        _ = try written(channel)
        var buffer = channel.allocator.buffer(capacity: 64)
        try ServerFrame(requestID: 0, body: .error(WireError(code: .tooManyConnections, message: "full", retryable: true))).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        try channel.writeInbound(buffer)
        guard case .failure(.server(let error)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(error.code == .tooManyConnections && error.retryable)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// The node refuses at once, as it accepts: its refusal may arrive before the hello is
    /// written. The hello written after it fails with the refusal, typed as the node sent it.
    @Test func aRefusalThatComesBeforeTheHelloIsWrittenRefusesTheHello() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
        var buffer = channel.allocator.buffer(capacity: 64)
        try ServerFrame(requestID: 0, body: .error(WireError(code: .tooManyConnections, message: "full", retryable: true))).encodeFrame(into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        try channel.writeInbound(buffer)
        let answers = Answers()
        send([PendingRequest(body: .hello(Hello(role: .client, clientName: "t", token: "")), answer: answers.sink(1))], on: channel)
        channel.embeddedEventLoop.run()
        guard case .failure(.server(let error)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(error.code == .tooManyConnections && error.retryable)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A request refused before it is written (here one the encoder refuses) is answered on a
    /// later turn of the loop, never from inside the caller's write, as
    /// ``RegistryClient/enqueue(_:after:onAnswer:)`` promises: a callback that enqueues again
    /// would otherwise recurse.
    @Test func aRequestRefusedBeforeItIsWrittenIsAnsweredOnALaterTurn() throws {
        let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
        let answers = Answers()
        channel.write(PendingRequest(body: .resolve(deviceID: "x\u{0}"), answer: answers.sink(1)), promise: nil)
        channel.flush()
        #expect(answers[1] == nil, "not answered from inside the write")
        channel.embeddedEventLoop.run()
        guard case .failure(.unexpectedResponse(let reason)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
        #expect(reason.contains("cannot encode"))
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// Requests still waiting when the client closes the connection are told that the client
    /// closed it; when the server does, that the server did (they were always told the server
    /// closed it).
    @Test func requestsWaitingAreToldWhoClosedTheConnection() throws {
        for clientCloses in [true, false] {
            let channel = EmbeddedChannel(handler: ClientChannelHandler(maxCoalesced: 1))
            let answers = Answers()
            send([PendingRequest(body: .register(registration(1)), answer: answers.sink(1))], on: channel)
            _ = try written(channel)
            if clientCloses { channel.close(promise: nil) } else { channel.pipeline.fireChannelInactive() }
            channel.embeddedEventLoop.run()
            guard case .failure(.connectionClosed(let reason)) = answers[1] else { return #expect(Bool(false), "\(String(describing: answers[1]))") }
            #expect(reason == (clientCloses ? "this client closed the connection" : "the server closed the connection"))
            _ = try channel.finish(acceptAlreadyClosed: true)
        }
    }
}
