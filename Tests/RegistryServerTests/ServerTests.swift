import NIOCore
import RegistryClient
import RegistryCore
import RegistryWire
import RegistryTestSupport
import Synchronization
import Testing
@testable import RegistryServer

@Suite(.serialized, .timeLimit(.minutes(5))) struct ServerTests {
    @Test func badInputGetsTypedErrorsAndOtherConnectionsCarryOn() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path) {
            $0.limits.maxFrameBytes = 4096
            $0.limits.maxBatchSize = 5
        }
        let bystander = try await node.client()
        let acknowledged = try await bystander.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1))

        func connectionError(_ send: (RawConnection) throws -> Void, hello: Bool = true) throws -> (ErrorCode?, Bool) {
            let raw = try RawConnection(port: node.port)
            defer { raw.close() }
            if hello { _ = try raw.sendHello() }
            try send(raw)
            let (frames, closed) = raw.readFramesAndClose()
            guard case .error(let error) = frames.last?.body else { return (nil, closed) }
            return (error.code, closed)
        }

        // A frame over the limit: refused from its length prefix alone.
        var prefix = ByteBuffer()
        prefix.writeInteger(UInt32(4097))
        #expect(try connectionError { $0.send(Array(prefix.readableBytesView)) } == (.frameTooLarge, true))
        // Bytes that are not protobuf.
        #expect(try connectionError { $0.send([0, 0, 0, 3, 0xFF, 0xFF, 0xFF]) } == (.malformedFrame, true))
        // A request before the hello.
        #expect(try connectionError({ try $0.send(ClientFrame(requestID: 5, body: .stats)) }, hello: false) == (.handshakeRequired, true))
        // A wrong protocol version.
        let v2 = ClientFrame(requestID: 1, body: .hello(Hello(version: ProtocolVersion(major: 2, minor: 0), role: .client, clientName: "")))
        #expect(try connectionError({ try $0.send(v2) }, hello: false) == (.unsupportedVersion, true))
        // A connection closed mid-frame: nothing to answer, the node just drops it.
        do {
            let raw = try RawConnection(port: node.port)
            _ = try raw.sendHello()
            raw.send([0, 0, 0, 50, 1, 2, 3])
            raw.close()
        }

        // Per-request errors leave the connection open.
        let raw = try RawConnection(port: node.port)
        defer { raw.close() }
        _ = try raw.sendHello()
        let batch = Array(repeating: RegisterRequest(bundleID: "com.v.a", idfv: idfv2), count: 6)
        try raw.send(ClientFrame(requestID: 10, body: .unknown))
        try raw.send(ClientFrame(requestID: 11, body: .registerBatch(batch)))
        try raw.send(ClientFrame(requestID: 12, body: .register(RegisterRequest(bundleID: "com.v", identifiers: []))))
        try raw.send(ClientFrame(requestID: 13, body: .register(RegisterRequest(bundleID: "com", idfv: idfv2))))
        try raw.send(ClientFrame(requestID: 14, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: "00000000-0000-0000-0000-000000000000"))))
        try raw.send(ClientFrame(requestID: 15, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: "not-a-uuid"))))
        try raw.send(ClientFrame(requestID: 16, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv2))))
        let frames = raw.readFrames(count: 7)
        let codes = frames.map { frame -> String in
            if case .error(let error) = frame.body { return "\(frame.requestID):\(error.code.name)" }
            return "\(frame.requestID):ok"
        }
        #expect(
            codes == [
                "10:unknown_message", "11:batch_too_large", "12:missing_identifier", "13:invalid_bundle_id",
                "14:invalid_identifier", "15:invalid_identifier", "16:ok",
            ])

        // The bystander's connection and its acknowledged data are untouched.
        let record = try await bystander.resolve(deviceID: acknowledged.deviceID)
        #expect(record.deviceID == acknowledged.deviceID)
        let stats = try await bystander.stats()
        #expect(stats.errors[.frameTooLarge] == 1 && stats.errors[.malformedFrame] == 2)
        #expect(stats.errors[.handshakeRequired] == 1 && stats.errors[.unsupportedVersion] == 1)
        #expect(stats.errors[.invalidIdentifier] == 2 && stats.errors[.batchTooLarge] == 1)
        await bystander.close()
        try await node.stop()
    }

    /// A NUL inside a string field is part of it: every string field of every request, sent with
    /// an embedded NUL (encoded here by hand, since protobuf-c cannot pack one), gets the typed
    /// error of that field's rule instead of being read up to the NUL.
    @Test func aNULInsideAnyStringFieldIsRefusedByThatFieldsRule() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        let known = try await client.register(RegisterRequest(bundleID: "com.acme.mail", idfv: idfv1))
        let raw = try RawConnection(port: node.port)
        defer { raw.close() }
        _ = try raw.sendHello()

        let nul = "\u{0}junk"
        func identifier(_ kind: UInt64, _ value: String) -> ProtoBytes { ProtoBytes().varint(1, kind).string(2, value) }
        func register(_ bundle: String, _ identifiers: ProtoBytes...) -> ProtoBytes {
            identifiers.reduce(ProtoBytes().string(1, bundle)) { $0.message(2, $1) }
        }
        let cases: [(String, ProtoBytes, String)] = [
            ("register bundle", ProtoBytes().message(3, register("com.acme.mail\u{0}evil", identifier(2, idfv2))), "invalid_bundle_id"),
            ("register idfv", ProtoBytes().message(3, register("com.acme.mail", identifier(2, idfv1 + nul))), "invalid_identifier"),
            (
                "register keychain beside a good idfv",
                ProtoBytes().message(3, register("com.acme.mail", identifier(1, key1 + nul), identifier(2, idfv1))), "invalid_identifier"
            ),
            ("batch bundle", ProtoBytes().message(4, ProtoBytes().message(1, register("com.acme\u{0}.mail", identifier(2, idfv2)))), "item:invalid_bundle_id"),
            ("batch idfv", ProtoBytes().message(4, ProtoBytes().message(1, register("com.acme.mail", identifier(2, idfv1 + nul)))), "item:invalid_identifier"),
            ("resolve device ID", ProtoBytes().message(5, ProtoBytes().string(1, known.deviceID + nul)), "invalid_device_id"),
            ("lookup bundle", ProtoBytes().message(6, ProtoBytes().string(1, "com.acme.mail\u{0}").message(3, identifier(2, idfv1))), "invalid_bundle_id"),
            ("lookup vendor", ProtoBytes().message(6, ProtoBytes().string(2, "com.acme\u{0}").message(3, identifier(2, idfv1))), "invalid_argument"),
            ("lookup identifier", ProtoBytes().message(6, ProtoBytes().string(2, "com.acme").message(3, identifier(2, idfv1 + nul))), "invalid_identifier"),
        ]
        for (index, (_, body, _)) in cases.enumerated() {
            raw.send(ProtoBytes().varint(1, UInt64(index + 1)).bytes(body).framed)
        }
        let answers = raw.readFrames(count: cases.count)
        #expect(answers.count == cases.count)
        for (answer, (name, _, expected)) in zip(answers, cases) {
            let got: String
            switch answer.body {
            case .error(let error): got = error.code.name
            case .registerBatchResult(let items):
                if case .error(let error) = items.first { got = "item:\(error.code.name)" } else { got = "item:ok" }
            default: got = "ok"
            }
            #expect(got == expected, "\(name): \(answer)")
        }
        // Nothing was recorded under the text before the NUL, and the connection still serves.
        #expect(try await client.stats().deviceCount == 1)
        try raw.send(ClientFrame(requestID: 99, body: .resolve(deviceID: known.deviceID)))
        #expect(raw.readFrames().first?.requestID == 99)
        await client.close()
        try await node.stop()
    }

    @Test func callsAfterTheServerWentAwayFailInsteadOfHanging() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        try await node.stop()
        for _ in 0..<3 {
            await #expect(throws: RegistryClientError.self) {
                try await client.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1))
            }
        }
        await client.close()
    }

    /// A load generator sends its next request from the answer callback of the last one. On a
    /// closed connection every answer is an immediate failure; answered inside `enqueue`, that
    /// recursed once per request until the stack overflowed (registryload crashed when its
    /// server died). The 50,000 resends here would overflow it.
    @Test func enqueueOnAClosedConnectionAnswersOnALaterTurnSoCallersMayResendFromTheirCallback() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        try await node.stop()
        await #expect(throws: RegistryClientError.self) { try await client.stats() }

        let loop = client.eventLoop
        let finished = loop.makePromise(of: Int.self)
        try await loop.submit {
            let state = NIOLoopBoundBox((insideEnqueue: false, answeredInside: 0, answers: 0), eventLoop: loop)
            @Sendable func send() {
                state.value.insideEnqueue = true
                client.enqueue(.stats) { result in
                    if state.value.insideEnqueue { state.value.answeredInside += 1 }
                    guard case .failure(.connectionClosed) = result else {
                        finished.fail(RegistryClientError.unexpectedResponse("\(result)"))
                        return
                    }
                    state.value.answers += 1
                    if state.value.answers < 50_000 { send() } else { finished.succeed(state.value.answeredInside) }
                }
                state.value.insideEnqueue = false
            }
            send()
        }.get()
        #expect(try await finished.futureResult.get() == 0)
        await client.close()
    }

    /// A stop while registrations are in flight: each call is answered or fails cleanly (none
    /// hangs), and every answered registration is durable: the reopened data directory resolves
    /// its identifier to the device it was told.
    @Test func gracefulShutdownAnswersWhatIsInFlightAndEveryAnswerIsDurable() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        let acknowledged = Acknowledged()
        let pending = Task {
            await withTaskGroup(of: Bool.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let idfv = UUID128(high: 9, low: UInt64(index) + 1).text
                        guard let result = try? await client.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv)) else { return false }
                        acknowledged.values.withLock { $0[idfv] = result.deviceID }
                        return true
                    }
                }
                return await group.reduce(into: (answered: 0, failed: 0)) { $0.answered += $1 ? 1 : 0; $0.failed += $1 ? 0 : 1 }
            }
        }
        // Stop once some answers arrived, while the rest are still in flight.
        while acknowledged.values.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(1)) }
        try await node.stop()
        let (answered, failed) = await pending.value
        #expect(answered + failed == 200)
        let acked = acknowledged.values.withLock { $0 }
        #expect(acked.count == answered && answered >= 1)

        let reopened = try TestNode.reopen(temp.path)
        defer { reopened.close() }
        #expect(reopened.stats().logOperations >= UInt64(answered))
        var lost = 0
        for (idfv, deviceID) in acked {
            let frame = ClientFrame(
                requestID: 1,
                body: .lookup(LookupRequest(scope: .vendor("com.v"), identifier: PresentedIdentifier(rawKind: 2, text: idfv))))
            let body = await withCheckedContinuation { continuation in
                reopened.submit([frame]) { continuation.resume(returning: $0.frames.first?.body) }
            }
            guard case .device(let record) = body, record.deviceID == deviceID else {
                lost += 1
                continue
            }
        }
        #expect(lost == 0, "\(lost) of \(acked.count) answered registrations are not in the reopened data directory")
        await client.close()
    }
}

/// Identifier to device ID of every answered registration, filled from concurrent tasks.
final class Acknowledged: Sendable {
    let values = Mutex<[String: String]>([:])
}

extension TestNode {
    /// An engine on a stopped node's data directory; the caller closes it.
    static func reopen(_ path: String) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.dataDirectory = path
        configuration.clusterSecret = clusterSecret
        return try RegistryEngine(configuration: configuration, logger: .quiet("reopen"))
    }

    /// Stats of a stopped node's data directory, read by reopening it.
    static func reopenStats(_ path: String) throws -> StatsMessage {
        let engine = try reopen(path)
        defer { engine.close() }
        return engine.stats()
    }
}
