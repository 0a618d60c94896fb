import Logging
import RegistryCore
import RegistryWire
import Synchronization
import RegistryTestSupport
import Testing
@testable import RegistryServer

@Suite(.timeLimit(.minutes(5))) struct EngineTests: EngineTesting {
    @Test func acknowledgedRegistrationsSurviveReopeningAndSequencesContinue() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var ids = [String]()
        do {
            let engine = try open(temp.path)
            for answer in await submit(engine, [
                .register(RegisterRequest(bundleID: "com.v.a", keychain: key1)),
                .register(RegisterRequest(bundleID: "com.v.b", idfv: idfv1)),
                .register(RegisterRequest(bundleID: "com.v.a", keychain: key1, idfv: idfv1)),
            ]) {
                guard case .registerResult(let result) = answer else { return #expect(Bool(false), "\(answer)") }
                ids.append(result.deviceID)
            }
            #expect(engine.stats().logOperations == 3)
            engine.close()
        }
        let engine = try open(temp.path, nodeID: nil)
        let stats = engine.stats()
        #expect(stats.nodeID == "node-a")
        #expect(stats.deviceCount == 1 && stats.aliasCount == 1 && stats.claimCount == 2)
        // The restart opened a new epoch; the earlier one is held whole.
        #expect(stats.logSequence == 0 && stats.versionVector.map(\.sequence) == [3] && stats.versionVector[0].epoch < stats.logEpoch)
        let answers = await submit(engine, [.resolve(deviceID: ids[1]), .register(RegisterRequest(bundleID: "com.v.c", idfv: idfv1))])
        guard case .device(let record) = answers[0], case .registerResult(let result) = answers[1] else {
            return #expect(Bool(false), "\(answers)")
        }
        #expect(record.deviceID == ids[0] && record.aliasIDs == [ids[1]])
        #expect(result.deviceID == ids[0])
        #expect(engine.stats().logSequence == 1)
        engine.close()
    }

    @Test func requestsSubmittedTogetherShareOneDurableCommit() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        let singles = (0..<100).map { ClientBody.register(RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: 1, low: UInt64($0) + 1).text)) }
        let batch = ClientBody.registerBatch(
            (0..<50).map { RegisterRequest(bundleID: "com.v.b", idfv: UUID128(high: 2, low: UInt64($0) + 1).text) })
        let started = ContinuousClock.now
        _ = await submit(engine, singles + [batch])
        let elapsed = ContinuousClock.now - started
        var stats = engine.stats()
        #expect(stats.logOperations == 150 && stats.logCommits == 1)
        // That commit's journal write and fdatasync is timed, within the time the whole call took
        // (its bucket's lower bound is below the call's wall time), and the journal holds its 150
        // operations.
        #expect(stats.commitLatency.total == 1)
        let bounds = stats.commitLatency.upperBoundsMicros
        let longest = try #require(stats.commitLatency.percentile(100))
        let bucket = try #require(bounds.firstIndex(of: longest))
        let elapsedMicros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        #expect(bucket == 0 || bounds[bucket - 1] < UInt64(elapsedMicros), "a commit timed longer than the call that made it")
        #expect(stats.journalBytes > 150 * 50 && stats.journalFiles == 1)
        // Read-only requests never cost a commit.
        _ = await submit(engine, [.stats, .resolve(deviceID: "00000000-0000-4000-8000-000000000001")])
        stats = engine.stats()
        #expect(stats.logCommits == 1)
    }

    /// One commit pass larger than a segment row splits into several rows, all replayed.
    /// A snapshot request in a group leaves it (the engine routes every request a connection
    /// reads): the rest are answered together as usual, the snapshot on its own once written
    /// (through what was durable when it started).
    @Test func aSnapshotRequestIsAnsweredApartFromItsGroup() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        let frames = [
            ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: "6E5B3A8C-1F2D-4C6B-9A7E-0D1C2B3A4F5E"))),
            ClientFrame(requestID: 2, body: .snapshot),
            ClientFrame(requestID: 3, body: .register(RegisterRequest(bundleID: "com.v.b", idfv: "6E5B3A8C-1F2D-4C6B-9A7E-0D1C2B3A4F5E"))),
        ]
        let (deliveries, continuation) = AsyncStream.makeStream(of: [ServerFrame].self)
        engine.submit(frames) { continuation.yield($0.frames) }
        var received = [[ServerFrame]]()
        for await frames in deliveries {
            received.append(frames)
            if received.count == 2 { break }
        }
        let byGroup = received.map { $0.map(\.requestID) }.sorted { $0.count > $1.count }
        #expect(byGroup == [[1, 3], [2]])
        let snapshot = try #require(received.first { $0.count == 1 }?.first)
        guard case .snapshotTaken = snapshot.body else {
            Issue.record("the snapshot request got \(snapshot.body)")
            return
        }
    }

    @Test func aLargeCommitIsSplitIntoSegmentsThatAllReplay() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let frames = (0..<5).map { frame in
            ClientBody.registerBatch(
                (0..<1_000).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(frame) + 1, low: UInt64($0) + 1).text) })
        }
        do {
            let engine = try open(temp.path)
            _ = await submit(engine, frames)
            #expect(engine.stats().logCommits == 1)
            engine.close()
        }
        #expect(5_000 > LogWriter.segmentRecords)
        let reopened = try open(temp.path)
        defer { reopened.close() }
        let stats = reopened.stats()
        #expect(stats.deviceCount == 5_000 && stats.logOperations == 5_000 && stats.logSequence == 0)
        // The version vector comes back from the log: the epoch written in, every operation held
        // (this start writes in a new one).
        #expect(stats.versionVector.count == 1 && stats.versionVector[0].sequence == 5_000 && stats.versionVector[0].epoch < stats.logEpoch)
    }

    @Test func theClockNeverRunsBackwardsAcrossRestarts() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var configuration = NodeConfiguration()
        configuration.dataDirectory = temp.path
        // A bound wide enough that the reopened node still takes writes (ClockAheadTests shows
        // that under the default bound it refuses them instead).
        configuration.maxClockSkewMillis = 10_000_000_000_000
        let future = Mutex<UInt64>(5_000_000_000_000)
        let engine = try RegistryEngine(configuration: configuration, logger: .quiet("t"), wallClock: { future.withLock { $0 } })
        _ = await submit(engine, [.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1))])
        engine.close()
        // The wall clock went back a long way; the HLC must not.
        let reopened = try RegistryEngine(configuration: configuration, logger: .quiet("t"), wallClock: { 1_000 })
        guard case .registerResult(let result) = await submit(reopened, [.register(RegisterRequest(bundleID: "com.v.b", idfv: idfv2))])[0],
            case .device(let record) = await submit(reopened, [.resolve(deviceID: result.deviceID)])[0]
        else { return #expect(Bool(false)) }
        #expect(record.createdAtMillis >= 5_000_000_000_000)
        reopened.close()
    }

    /// A first start logs the config file's vendor rules as the seed and returns once that is
    /// durable: what the node writes next goes in a commit of its own, so that a start writes the
    /// same journal every time (the cluster simulation's replays counted disk changes that
    /// differed by whether a registration joined the seed's commit).
    @Test func aFirstStartReturnsWithItsVendorSeedDurable() throws {
        var configuration = NodeConfiguration()
        configuration.vendorRules = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"])])
        for _ in 0..<5 {
            let temp = try TemporaryDirectory()
            defer { temp.remove() }
            configuration.dataDirectory = temp.path
            let engine = try RegistryEngine(configuration: configuration, logger: .quiet("t"))
            // Read at once: nothing waited for the commit.
            let seeded = engine.durableVector.logs.map(\.1).reduce(0, +)
            engine.close()
            #expect(seeded > 0, "the seed was not durable when the engine was built")
        }
    }

    @Test func aDataDirectoryOfAnotherNodeIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        try open(temp.path).close()
        #expect(throws: NodeStartupError.nodeIDMismatch(stored: "node-a", configured: "node-b")) {
            try open(temp.path, nodeID: "node-b")
        }
    }

    @Test func aClosedEngineRefusesWithARetryableError() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        engine.close()
        guard case .error(let error) = await submit(engine, [.stats])[0] else { return #expect(Bool(false)) }
        #expect(error.code == .unavailable && error.retryable)
    }
}
