import NIOCore
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// The client library sends single registrations written together as one batch frame; each
/// must get the answer it would have got in a frame of its own, in order.
// Three minutes, not one: an in-process node and client wait on the cooperative pool, which the
// suite's CPU-bound tests can keep busy for a minute on 2 cores.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CoalescingTests {
    /// Ten registrations with a lookup among them: two apps of one device, one bad bundle, and a
    /// lookup that must see the registrations written before it.
    static let bodies: [ClientBody] = {
        func idfv(_ n: Int) -> String { UUID128(high: 0x1111, low: UInt64(n)).text }
        var bodies = (0..<6).map { n -> ClientBody in
            .register(RegisterRequest(bundleID: n == 1 ? "com.v.b" : "com.v.a", idfv: idfv(n == 1 ? 0 : n)))
        }
        bodies[3] = .register(RegisterRequest(bundleID: "not a bundle", idfv: idfv(3)))
        bodies.append(.lookup(LookupRequest(scope: .vendor("com.v"), identifier: PresentedIdentifier(rawKind: 2, text: idfv(5)))))
        bodies += (6..<10).map { n in .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv(n))) }
        return bodies
    }()

    /// Enqueues `bodies` on the client's event loop, flushes once, and returns the answers in order
    /// with the number of frames the node served meanwhile.
    func send(_ bodies: [ClientBody], through client: RegistryClient) async throws -> (answers: [ServerBody], frames: UInt64) {
        let before = try await client.stats().requestsServed
        let loop = client.eventLoop
        let promises = bodies.map { _ in loop.makePromise(of: ServerBody.self) }
        try await loop.submit {
            for (body, promise) in zip(bodies, promises) {
                client.enqueue(body) { promise.completeWith($0.map(\.body).mapError { $0 as any Error }) }
            }
            client.flush()
        }.get()
        var answers = [ServerBody]()
        for promise in promises { answers.append(try await promise.futureResult.get()) }
        // The stats call before is counted, the one after is not.
        return (answers, try await client.stats().requestsServed - before - 1)
    }

    /// What a test can compare between two nodes: device IDs are random, so each is replaced by
    /// the index of the answer that first named it.
    func shape(_ answers: [ServerBody]) -> [String] {
        var firstSeen = [String: Int]()
        func name(_ id: String) -> Int {
            if let index = firstSeen[id] { return index }
            firstSeen[id] = firstSeen.count
            return firstSeen.count - 1
        }
        return answers.map { answer in
            switch answer {
            case .registerResult(let result): return "device \(name(result.deviceID)) created \(result.created)"
            case .device(let record): return "lookup: device \(name(record.deviceID)), apps \(record.apps.map(\.bundleID))"
            case .error(let error): return "error \(error.code.name)"
            default: return "\(answer)"
            }
        }
    }

    @Test func coalescedRegistrationsGetTheAnswersTheyWouldGetOneFrameEach() async throws {
        let first = try TemporaryDirectory()
        let second = try TemporaryDirectory()
        defer {
            first.remove()
            second.remove()
        }
        // A batch limit of 4 splits the ten registrations into frames of at most four.
        let coalescingNode = try await TestNode.start(dataDirectory: first.path) { $0.limits.maxBatchSize = 4 }
        let aloneNode = try await TestNode.start(dataDirectory: second.path) { $0.limits.maxBatchSize = 4 }
        let coalescing = try await coalescingNode.client()
        let alone = try await aloneNode.client(maxCoalesced: 1)

        let together = try await send(Self.bodies, through: coalescing)
        let separately = try await send(Self.bodies, through: alone)

        #expect(shape(together.answers) == shape(separately.answers))
        #expect(
            shape(together.answers) == [
                "device 0 created true", "device 0 created false", "device 1 created true", "error invalid_bundle_id",
                "device 2 created true", "device 3 created true", "lookup: device 3, apps [\"com.v.a\"]",
                "device 4 created true", "device 5 created true", "device 6 created true", "device 7 created true",
            ])
        // Frames: four registrations, the two before the lookup, the lookup, then four more.
        #expect(together.frames == 4)
        #expect(separately.frames == 11)

        await coalescing.close()
        await alone.close()
        try await coalescingNode.stop()
        try await aloneNode.stop()
    }

    /// Concurrent `register` calls from many tasks: each gets its own device and answer, whether
    /// or not the timing let some of them share a frame.
    @Test func concurrentRegisterCallsEachGetTheirOwnAnswer() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        let ids = try await withThrowingTaskGroup(of: (Int, String).self) { group in
            for n in 0..<200 {
                group.addTask {
                    let idfv = UUID128(high: 0x2222, low: UInt64(n / 2)).text
                    let result = try await client.register(RegisterRequest(bundleID: n % 2 == 0 ? "com.v.a" : "com.v.b", idfv: idfv))
                    return (n, result.deviceID)
                }
            }
            var ids = [Int: String]()
            for try await (n, id) in group { ids[n] = id }
            return ids
        }
        #expect(ids.count == 200 && Set(ids.values).count == 100)
        for pair in 0..<100 { #expect(ids[2 * pair] == ids[2 * pair + 1]) }
        await client.close()
        try await node.stop()
    }

    /// Registrations held for a frame when the connection ends are failed, not left waiting.
    @Test func registrationsHeldWhenTheConnectionEndsFail() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let client = try await node.client()
        let loop = client.eventLoop
        let promises = (0..<3).map { _ in loop.makePromise(of: ServerBody.self) }
        try await loop.submit {
            for (n, promise) in promises.enumerated() {
                let request = RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: 0x3333, low: UInt64(n)).text)
                client.enqueue(.register(request)) { promise.completeWith($0.map(\.body).mapError { $0 as any Error }) }
            }
        }.get()
        // Never flushed: they are still held when the client closes the connection.
        await client.close()
        for promise in promises {
            await #expect(throws: RegistryClientError.self) { try await promise.futureResult.get() }
        }
        try await node.stop()
    }
}
