import Foundation
import Platform
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// Causal tokens on real engines: node A's answer names what it reflects, and node B holds a
/// request carrying that token until A's operations reach it (here through
/// ``RegistryEngine/submitRemote(_:deliver:)``, replication's own path), or answers
/// NOT_CAUGHT_UP once its `--causal-timeout` passes.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CausalTokenEngineTests {
    func open(_ path: String, node: String, causalTimeoutMillis: UInt64 = 10_000) throws -> RegistryEngine {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID(node)
        configuration.causalTimeoutMillis = causalTimeoutMillis
        return try RegistryEngine(configuration: configuration, logger: .quiet())
    }

    /// Submits `frames` as one group; the answers arrive through `answers` whenever they do.
    func submit(_ engine: RegistryEngine, _ frames: [ClientFrame]) -> AsyncStream<[ServerFrame]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [ServerFrame].self)
        engine.submit(frames) { answers in
            continuation.yield(answers.frames)
            continuation.finish()
        }
        return stream
    }

    func answer(_ engine: RegistryEngine, _ frames: [ClientFrame]) async throws -> [ServerFrame] {
        var answers = submit(engine, frames).makeAsyncIterator()
        return try #require(await answers.next())
    }

    func register(keychain: UUID128, idfv: UUID128, requestID: UInt64 = 1, after: CausalToken = .empty) -> ClientFrame {
        ClientFrame(
            requestID: requestID, body: .register(RegisterRequest(bundleID: "com.v.app1", keychain: keychain.text, idfv: idfv.text)),
            after: after)
    }

    func deviceID(_ frame: ServerFrame) -> String? {
        if case .registerResult(let result) = frame.body { return result.deviceID }
        return nil
    }

    /// Every operation of `engine`'s own log.
    func ownOperations(_ engine: RegistryEngine) throws -> [LoggedOperation] {
        try engine.logReader(for: engine.peerIdentity.ownLog, from: 1).next(atMost: 1_000)
    }

    func applyRemote(_ engine: RegistryEngine, _ operations: [LoggedOperation]) async throws {
        let result = await withCheckedContinuation { continuation in engine.submitRemote(operations) { continuation.resume(returning: $0) } }
        _ = try result.get()
    }

    /// A reinstall (same keychain UUID, new IDFV) sent to a node that has not heard of the
    /// device: without the token it makes a second device; with it, the node waits for the
    /// creation and answers the device's own ID.
    @Test func aNodeHoldsARequestUntilItHoldsWhatItsTokenNames() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let a = try open(temp.path + "/a", node: "node-a")
        // B holds the request until the test hands it A's operations: a few awaits, which a
        // full suite on 2 cores can delay past 10 s; the timeout's own test is below.
        let b = try open(temp.path + "/b", node: "node-b", causalTimeoutMillis: 120_000)
        let c = try open(temp.path + "/c", node: "node-c")
        defer { for engine in [a, b, c] { engine.close() } }
        let keychain = UUID128(high: 1, low: 1)
        let created = try await answer(a, [register(keychain: keychain, idfv: UUID128(high: 2, low: 1))])
        let id = try #require(deviceID(created[0]))
        // The answer names node-a's log through the operation that created the device.
        let token = created[0].token
        #expect(token.positions.map(\.origin) == ["node-a"] && token.positions[0].sequence >= 1, "\(token)")

        // Without the token, a node that has not heard of the device makes another one.
        let unaware = try await answer(c, [register(keychain: keychain, idfv: UUID128(high: 2, low: 2))])
        #expect(deviceID(unaware[0]) != id)

        // With it, B holds the request.
        let answered = Mutex<[ServerFrame]?>(nil)
        let stream = submit(b, [register(keychain: keychain, idfv: UUID128(high: 2, low: 3), after: token)])
        let listener = Task {
            for await frames in stream { answered.withLock { $0 = frames } }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(answered.withLock { $0 } == nil, "answered before holding what the token names")

        // A's operations arrive: the request goes on and finds A's device.
        try await applyRemote(b, try ownOperations(a))
        await listener.value
        let frames = try #require(answered.withLock { $0 })
        #expect(deviceID(frames[0]) == id)
        // Its own token covers what it waited for.
        #expect(frames[0].token.merging(token) == frames[0].token)
    }

    /// Past `--causal-timeout`, a request whose token is still not held is answered NOT_CAUGHT_UP
    /// (retryable, naming the node whose log it needs); the others of its group are answered as
    /// usual, and a token naming no valid log is the request's own INVALID_ARGUMENT.
    @Test func pastTheTimeoutTheAnswerIsNotCaughtUpAndNamesTheNode() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let b = try open(temp.path + "/b", node: "node-b", causalTimeoutMillis: 200)
        defer { b.close() }
        let ahead = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 7, sequence: 3)])
        let invalid = CausalToken(positions: [LogPosition(origin: "not a node id!", epoch: 1, sequence: 1)])
        let started = Date()
        let frames = try await answer(
            b,
            [
                register(keychain: UUID128(high: 3, low: 1), idfv: UUID128(high: 4, low: 1), requestID: 1, after: ahead),
                register(keychain: UUID128(high: 3, low: 2), idfv: UUID128(high: 4, low: 2), requestID: 2),
                register(keychain: UUID128(high: 3, low: 3), idfv: UUID128(high: 4, low: 3), requestID: 3, after: invalid),
            ])
        #expect(Date().timeIntervalSince(started) >= 0.2)
        #expect(frames.map(\.requestID) == [1, 2, 3])
        guard case .error(let error) = frames[0].body else { Issue.record("\(frames[0].body)"); return }
        #expect(error.code == .notCaughtUp && error.retryable)
        #expect(error.message.contains("node-a") && error.message.contains("log 7 through 3"), "\(error.message)")
        #expect(deviceID(frames[1]) != nil)
        guard case .error(let invalidError) = frames[2].body else { Issue.record("\(frames[2].body)"); return }
        #expect(invalidError.code == .invalidArgument && !invalidError.retryable)
        #expect(b.counters.errorCounts[.notCaughtUp] == 1)
    }

    /// A token may name any node, and a node keeps every node ID it makes (``InternedText``):
    /// a node this one never heard of is read without making its ID. The request waits out the
    /// timeout, as for a log this node lacks, and is answered NOT_CAUGHT_UP naming that node.
    @Test func aTokenNamingANodeNeverHeardOfWaitsAndMakesNoNodeID() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let b = try open(temp.path + "/b", node: "node-b", causalTimeoutMillis: 200)
        defer { b.close() }
        let unheard = "node-unheard-\(UInt64.random(in: 1 ... .max))"
        let token = CausalToken(positions: [LogPosition(origin: unheard, epoch: 7, sequence: 3)])
        let started = Date()
        let frames = try await answer(b, [register(keychain: UUID128(high: 9, low: 1), idfv: UUID128(high: 10, low: 1), after: token)])
        #expect(Date().timeIntervalSince(started) >= 0.2)
        guard case .error(let error) = frames[0].body else { Issue.record("\(frames[0].body)"); return }
        #expect(error.code == .notCaughtUp && error.retryable)
        #expect(error.message.contains("\(unheard) holds its log 7 through 3, this node through 0"), "\(error.message)")
        #expect(InternedText.existing(unheard) == nil)
    }

    /// The timeout is kept by the monotonic clock: a wall clock that steps back while a request
    /// waits (here 10 s at every reading) still has it answered NOT_CAUGHT_UP once the timeout
    /// passes. With deadlines read from the wall clock, the timer found nothing due, nothing
    /// checked again, and the request was never answered.
    @Test func aWallClockSteppingBackDoesNotHoldARequestPastItsTimeout() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = temp.path
        configuration.nodeID = try NodeID("node-b")
        configuration.causalTimeoutMillis = 200
        let b = try RegistryEngine(
            configuration: configuration, logger: .quiet(), wallClock: steppingBackClock(from: SystemClock.wallMillis(), by: 10_000))
        defer { b.close() }
        let token = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 7, sequence: 3)])
        let frames = submit(b, [register(keychain: UUID128(high: 11, low: 1), idfv: UUID128(high: 12, low: 1), after: token)])
        let answered = await withTaskGroup(of: [ServerFrame]?.self) { group in
            group.addTask {
                var answers = frames.makeAsyncIterator()
                return await answers.next()
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        let answer = try #require(answered, "the request was not answered within 20 s of a 200 ms timeout")
        guard case .error(let error) = answer.first?.body else { return #expect(Bool(false), "\(answer)") }
        #expect(error.code == .notCaughtUp)
    }

    /// A group held for a token keeps the requests refused before it as their refusals, not as
    /// their bodies: an oversized batch decodes to many times its frame's bytes, and held with its
    /// group it stayed in memory for the whole wait. Once the timeout passes, every request is
    /// answered as before: the batch with its own refusal, the waiting request NOT_CAUGHT_UP.
    @Test func aHeldGroupKeepsItsRefusedRequestsAsTheirRefusals() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let b = try open(temp.path + "/b", node: "node-b", causalTimeoutMillis: 200)
        defer { b.close() }
        let oversized = (0...Int(Limits.default.maxBatchSize)).map { RegisterRequest(bundleID: "com.v.app1", idfv: UUID128(high: 21, low: UInt64($0) + 1).text) }
        let token = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 7, sequence: 3)])
        let group = [
            ClientFrame(requestID: 1, body: .registerBatch(oversized)),
            register(keychain: UUID128(high: 22, low: 1), idfv: UUID128(high: 23, low: 1), requestID: 2, after: token),
        ]
        // What is held: the batch as its refusal, with no body.
        var resolver = b.requests.resolver(capacity: 0)
        let prepared = group.map { ConnectionAccess.unrestricted.prepare($0.body, resolver: &resolver, limits: .default, identifierKey: b.identifierKey) }
        let held = CausalHolding.waiter(group, prepared: prepared, access: .unrestricted) { _ in }
        #expect(held.frames.map(\.requestID) == [1, 2] && held.frames[0].body == .unknown && held.frames[1] == group[1])
        #expect(held.refusals.map(\.index) == [0] && held.refusals.first?.error.code == .batchTooLarge)
        // Through the engine: held, then answered in order once the timeout passes.
        let started = Date()
        let frames = try await answer(b, group)
        #expect(Date().timeIntervalSince(started) >= 0.2, "the group was held")
        #expect(frames.map(\.requestID) == [1, 2])
        guard case .error(let tooLarge) = frames[0].body, case .error(let waited) = frames[1].body else {
            return #expect(Bool(false), "\(frames)")
        }
        #expect(tooLarge.code == .batchTooLarge && waited.code == .notCaughtUp)
    }

    /// One token answers a whole group, taken as its last request is decided: a group that ends
    /// with a stats request still names the registration before it.
    @Test func aGroupEndingInStatsStillCarriesItsToken() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let a = try open(temp.path + "/a", node: "node-a")
        defer { a.close() }
        let frames = try await answer(
            a, [register(keychain: UUID128(high: 7, low: 1), idfv: UUID128(high: 8, low: 1)), ClientFrame(requestID: 2, body: .stats)])
        #expect(frames.allSatisfy { $0.token.positions.map(\.origin) == ["node-a"] }, "\(frames.map(\.token))")
    }

    /// A token leaves out the logs every member holds, and a node without peers gives none.
    @Test func tokensLeaveOutWhatEveryMemberHolds() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let a = try open(temp.path + "/a", node: "node-a")
        defer { a.close() }
        let first = try await answer(a, [register(keychain: UUID128(high: 5, low: 1), idfv: UUID128(high: 6, low: 1))])
        let own = try #require(first[0].token.positions.first)
        #expect(first[0].token.positions.count == 1)
        // Every member holds the log through `own`: only what follows is named.
        a.setRetentionFloor([a.peerIdentity.ownLog: own.sequence])
        let lookup = ClientFrame(
            requestID: 1, body: .lookup(LookupRequest(scope: .vendor("com.v"), identifier: PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, text: UUID128(high: 5, low: 1).text))))
        #expect(try await answer(a, [lookup])[0].token.isEmpty)
        let second = try await answer(a, [register(keychain: UUID128(high: 5, low: 2), idfv: UUID128(high: 6, low: 2))])
        #expect(second[0].token.positions.map(\.sequence) == [own.sequence + 1])
        // No peers at all: every member (this one) holds everything.
        a.setRetentionFloor(nil)
        #expect(try await answer(a, [lookup])[0].token.isEmpty)
    }
}
