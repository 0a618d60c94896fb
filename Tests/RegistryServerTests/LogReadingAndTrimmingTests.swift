import Foundation
import Logging
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Synchronization
import NIOPosix
import Testing
@testable import RegistryServer

/// Reading the log while the node serves, and trimming the journal after snapshots.
@Suite(.serialized, .timeLimit(.minutes(5))) struct LogReadingAndTrimmingTests: EngineTesting {
    func open(_ path: String, fileBytes: Int = 32 << 10, everyOperations: Int = 0, fs: any FileSystem = PosixFileSystem()) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID("node-a")
        configuration.journalFileBytes = fileBytes
        configuration.snapshotEveryOperations = everyOperations
        configuration.snapshotEverySeconds = 0
        return try RegistryEngine(configuration: configuration, logger: .quiet(), fs: fs)
    }

    func register(_ engine: RegistryEngine, batches: Range<Int>) async -> [String] {
        var ids = [String]()
        for batch in batches {
            let requests = (0..<20).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(batch) + 1, low: UInt64($0) + 1).text) }
            for answer in await submit(engine, [.registerBatch(requests)]) {
                guard case .registerBatchResult(let items) = answer else { continue }
                ids += items.compactMap { if case .result(let result) = $0 { result.deviceID } else { nil } }
            }
        }
        return ids
    }

    func snapshot(_ engine: RegistryEngine) async -> Snapshotter.Taken? {
        await withCheckedContinuation { continuation in
            engine.pipeline.snapshotNow { outcome in
                if case .success(let taken) = outcome { continuation.resume(returning: taken) } else { continuation.resume(returning: nil) }
            }
        }
    }

    /// A reader following the node's own log during a load gets every acknowledged operation once,
    /// in order, as it is committed.
    @Test func aReaderFollowingTheLogDuringALoadGetsEveryOperationOnceInOrder() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        let own = LogID(origin: NodeID(trusted: "node-a"), epoch: engine.stats().logEpoch)
        let reader = try engine.logReader(for: own, from: 1)
        let load = Task { await register(engine, batches: 0..<300) }
        var read = [LoggedOperation]()
        // Read while the load runs, then to the end.
        while !load.isCancelled {
            read += try reader.next(atMost: 500)
            if read.count >= 6_000 { break }
            if read.count < 6_000 { try await Task.sleep(for: .milliseconds(2)) }
        }
        let acknowledged = await load.value
        read += try reader.next(atMost: 10_000)
        #expect(acknowledged.count == 6_000)
        #expect(read.map(\.sequence) == Array(1...6_000), "in order, once each, without gaps")
        var devices = Set<DeviceID>()
        for operation in read {
            if case .registration(let op) = operation.operation { devices.insert(op.device.id) }
        }
        #expect(Set(acknowledged.map { try! DeviceID(parsing: $0) }).isSubset(of: devices), "every acknowledged device was read")
        #expect(try reader.next(atMost: 10).isEmpty, "caught up")
    }

    /// After snapshots the journal files they cover go: a reader asking for a trimmed position is
    /// refused with the typed error, a position past the snapshot still reads, and a restart gives
    /// the same state.
    @Test func trimmingRemovesOnlyWhatSnapshotsCoverAndARestartGivesTheSameState() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var before: RegistryState.Snapshot?
        var epoch: UInt64 = 0
        do {
            let engine = try open(temp.path)
            epoch = engine.stats().logEpoch
            _ = await register(engine, batches: 0..<200)
            let filesBefore = try CommitJournal.files(in: temp.path, on: PosixFileSystem())
            #expect(filesBefore.count > 4)
            let first = try #require(await snapshot(engine))
            #expect(first.operations == 4_000 && first.filesRemoved == filesBefore.count - 1, "all but the file being written")
            _ = await register(engine, batches: 200..<400)
            // Two snapshots are kept, and a file goes only once both cover it: the files written
            // since the first stay until a third.
            let second = try #require(await snapshot(engine))
            #expect(second.operations == 8_000 && second.filesRemoved == 0)
            _ = await register(engine, batches: 400..<410)
            let third = try #require(await snapshot(engine))
            #expect(third.operations == 8_200 && third.filesRemoved > 0)
            let own = LogID(origin: NodeID(trusted: "node-a"), epoch: epoch)
            #expect {
                _ = try engine.logReader(for: own, from: 1)
            } throws: { error in
                guard case JournalReadError.trimmed(_, let requested, let through) = error else { return false }
                return requested == 1 && through > 0
            }
            // What the journal still holds reads on, from past what was trimmed.
            let through = engine.index.trimmedThrough(LogID(origin: NodeID(trusted: "node-a"), epoch: epoch))
            let reader = try engine.logReader(for: own, from: through + 1)
            let rest = try reader.next(atMost: 100_000)
            #expect(rest.first?.sequence == through + 1 && rest.last?.sequence == 8_200)
            before = engine.snapshotState()
            engine.close()
        }
        let reopened = try open(temp.path)
        defer { reopened.close() }
        #expect(reopened.snapshotState() == before)
        // A new epoch: the one written in is held whole.
        #expect(reopened.stats().logSequence == 0 && reopened.durableVector[LogID(origin: NodeID(trusted: "node-a"), epoch: epoch)] == 8_200)
    }

    /// A retention floor keeps the journal files past it even when snapshots cover them; lifting
    /// it lets the next snapshot trim them.
    @Test func aRetentionFloorKeepsFilesUntilItPasses() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        let own = LogID(origin: NodeID(trusted: "node-a"), epoch: engine.stats().logEpoch)
        engine.setRetentionFloor([own: 1_000])
        _ = await register(engine, batches: 0..<200)
        let held = try #require(await snapshot(engine))
        // Only files wholly at or below the floor went: operation 1,001 onwards is still there.
        #expect(held.filesRemoved >= 0)
        let reader = try engine.logReader(for: own, from: 1_001)
        #expect(try reader.next(atMost: 1).first?.sequence == 1_001)
        engine.setRetentionFloor(nil)
        _ = await register(engine, batches: 200..<210)
        _ = try #require(await snapshot(engine))
        _ = await register(engine, batches: 210..<220)
        let lifted = try #require(await snapshot(engine))
        #expect(lifted.filesRemoved > 0, "both kept snapshots cover the files the floor held")
        #expect(throws: JournalReadError.self) { _ = try engine.logReader(for: own, from: 1_001) }
    }

    /// A node whose state lists another member keeps its journal from its start until the
    /// cluster says what the members hold (replication starts after the node serves): before, a
    /// snapshot in that window trimmed files the other member still needed, which then had to
    /// take a whole snapshot instead of the journal.
    @Test func aMemberOfAClusterKeepsItsJournalUntilTheClusterSetsTheFloor() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let engine = try open(temp.path)
            let joined = LoggedOperation(
                origin: NodeID(trusted: "node-b"), epoch: 1, sequence: 1, timestamp: HLCTimestamp(millis: 1_000, counter: 0),
                operation: .membership(MembershipOp(node: NodeID(trusted: "node-b"), address: "127.0.0.1:7401", removed: false, at: HLCTimestamp(millis: 1_000, counter: 0))))
            let applied = await withCheckedContinuation { continuation in engine.submitRemote([joined]) { continuation.resume(returning: $0) } }
            #expect((try? applied.get()) != nil)
            engine.close()
        }
        let engine = try open(temp.path)
        defer { engine.close() }
        #expect(engine.members[NodeID(trusted: "node-b")] != nil)
        _ = await register(engine, batches: 0..<200)
        for _ in 0..<3 {
            let taken = try #require(await snapshot(engine))
            #expect(taken.filesRemoved == 0, "no file goes before the cluster says what node-b holds")
            _ = await register(engine, batches: 200..<210)
        }
        let own = LogID(origin: engine.nodeID, epoch: engine.stats().logEpoch)
        #expect(try engine.logReader(for: own, from: 1).next(atMost: 1).first?.sequence == 1)
    }

    /// Journal files the retention floor held back go once it moves past them, with no snapshot
    /// after; and that trim stands in no snapshot's way: one asked for while it runs is taken after
    /// it. (At 762b200 such a trim took the snapshots' running flag: the snapshot was answered
    /// "one is running", and the snapshot policy, left taking, never started one again.)
    @Test func filesTheFloorHeldGoWhenItMovesAndASnapshotAskedForMeanwhileIsTaken() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let disk = GatedFileSystem(holdingRenamesTo: nil)
        let engine = try open(temp.path, fs: disk)
        defer { engine.close() }
        func journalFiles() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: temp.path).filter { $0.hasPrefix("journal-") }.count }
        engine.setRetentionFloor([:])
        _ = await register(engine, batches: 0..<200)
        let first = try #require(await snapshot(engine))
        #expect(first.filesRemoved == 0, "the floor holds every file")
        let before = try journalFiles()
        #expect(before > 2)

        // The floor passes everything: a trim starts, held at its first removal.
        disk.holdNextRemove()
        let own = LogID(origin: engine.nodeID, epoch: engine.stats().logEpoch)
        engine.setRetentionFloor([own: .max])
        guard await disk.waitUntilReached() else {
            Issue.record("the trim never removed a file")
            return
        }
        _ = await register(engine, batches: 200..<205)
        let outcome = Mutex<Result<Snapshotter.Taken, StorageError>??>(nil)
        engine.pipeline.snapshotNow { result in outcome.withLock { $0 = .some(result) } }
        // Time for the request to reach the snapshots (an answer that one is running came here).
        try await Task.sleep(for: .milliseconds(500))
        disk.open()
        #expect(try await poll(upTo: .seconds(60)) { outcome.withLock { $0 != nil } })
        guard case .success? = outcome.withLock({ $0 }) ?? nil else {
            Issue.record("the snapshot asked for during the trim was not taken: \(String(describing: outcome.withLock { $0 }))")
            return
        }
        #expect(try journalFiles() < before, "the files the floor held went")
        #expect(await snapshot(engine) != nil, "snapshots go on")
    }

    @Test func aNodeSnapshotsByItselfEveryNOperations() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path, everyOperations: 1_000)
        defer { engine.close() }
        _ = await register(engine, batches: 0..<120)
        // The snapshot runs in the background: wait for it to be reported.
        for _ in 0..<500 where engine.stats().snapshotOperations < 1_000 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(engine.stats().snapshotOperations >= 1_000)
        #expect(try SnapshotFile.labels(in: temp.path, on: PosixFileSystem()).count >= 1)
    }

    /// A configured peer that has never been reached holds nothing: the replication's retention
    /// floor keeps every journal file, snapshots or not, so that the peer can catch up from the
    /// log when it comes.
    @Test func aPeerThatWasNeverReachedKeepsTheJournal() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        // Port 9 on loopback: nothing listens there.
        let replication = Replication(
            engine: engine, peers: [PeerAddress(host: "127.0.0.1", port: 9)], group: MultiThreadedEventLoopGroup.singleton, logger: .quiet())
        replication.start()
        defer { replication.stop() }
        try await Task.sleep(for: .seconds(Replication.floorIntervalSeconds) + .milliseconds(500))
        _ = await register(engine, batches: 0..<200)
        let first = try #require(await snapshot(engine))
        _ = await register(engine, batches: 200..<220)
        let second = try #require(await snapshot(engine))
        #expect(first.filesRemoved == 0 && second.filesRemoved == 0)
        let own = LogID(origin: NodeID(trusted: "node-a"), epoch: engine.stats().logEpoch)
        #expect(try engine.logReader(for: own, from: 1).next(atMost: 1).first?.sequence == 1)
        #expect(engine.stats().peers.first?.state == "disconnected")
    }
}

extension RegistryEngine {
    /// The engine's state, normalised (for comparing across a restart).
    func snapshotState() -> RegistryState.Snapshot {
        withState { $0.snapshot() }
    }

}
