import Foundation
import Platform
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// A node installing a snapshot a peer sent (``RegistryEngine/installIncomingSnapshot()``), on
/// real engines and data directories. The oracle is a third node that received the same
/// operations one by one through replication's usual path.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SnapshotInstallTests: EngineTesting {
    func open(_ path: String, node: String, fs: any FileSystem = PosixFileSystem()) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID(node)
        configuration.journalFileBytes = 32 << 10
        configuration.snapshotEveryOperations = 0
        configuration.snapshotEverySeconds = 0
        return try RegistryEngine(configuration: configuration, logger: .quiet(), fs: fs)
    }

    func register(_ engine: RegistryEngine, batches: Range<Int>) async {
        for batch in batches {
            let requests = (0..<20).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(batch) + 1, low: UInt64($0) + 1).text) }
            _ = await submit(engine, [.registerBatch(requests)])
        }
    }

    func snapshot(_ engine: RegistryEngine) async throws {
        let taken = await withCheckedContinuation { continuation in
            engine.pipeline.snapshotNow { outcome in
                if case .success = outcome { continuation.resume(returning: true) } else { continuation.resume(returning: false) }
            }
        }
        try #require(taken)
    }

    /// Every operation of `engine`'s own log, read before trimming.
    func ownOperations(_ engine: RegistryEngine) throws -> [LoggedOperation] {
        try engine.logReader(for: engine.peerIdentity.ownLog, from: 1).next(atMost: 1_000_000)
    }

    func applyRemote(_ engine: RegistryEngine, _ operations: [LoggedOperation]) async throws {
        for start in stride(from: 0, to: operations.count, by: 1_000) {
            let batch = Array(operations[start..<min(start + 1_000, operations.count)])
            let result = await withCheckedContinuation { continuation in engine.submitRemote(batch) { continuation.resume(returning: $0) } }
            _ = try result.get()
        }
    }

    /// Registers on A until its journal is trimmed and snapshots cover it, returning A's operations.
    func trimmedSource(_ a: RegistryEngine) async throws -> [LoggedOperation] {
        let own = a.peerIdentity.ownLog
        var operations = [LoggedOperation]()
        for batches in [0..<200, 200..<210, 210..<220] {
            await register(a, batches: batches)
            operations += try a.logReader(for: own, from: UInt64(operations.count) + 1).next(atMost: 1_000_000)
            try await snapshot(a)
        }
        #expect(throws: JournalReadError.self) { _ = try a.logReader(for: own, from: 1) }
        return operations
    }

    /// Copies A's newest snapshot file to where B receives one, as the chunks would.
    func send(_ a: RegistryEngine, to b: RegistryEngine) throws {
        let newest = try #require(try a.snapshots.openNewest())
        defer { newest.close() }
        let bytes = try newest.read(at: 0, count: newest.bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: b.snapshots.incomingPath))
    }

    /// Installs the snapshot sent to `b` while `arriving` come in as a peer's batch: the install is
    /// held at its rename (``GatedFileSystem``), inside the writer's queue, until the node has
    /// applied them (`log` held through `through` in memory), so the race happens every time.
    /// Returns what the install says the node holds; nil when the held call was never reached.
    func install(
        _ b: RegistryEngine, gated: GatedFileSystem, while arriving: [LoggedOperation], holding log: LogID, through: UInt64
    ) async throws -> VersionVector? {
        let install = Task.detached { b.installIncomingSnapshot() }
        guard await gated.waitUntilReached() else {
            Issue.record("the held call was never reached")
            return nil
        }
        let batch = Task.detached {
            await withCheckedContinuation { continuation in b.submitRemote(arriving) { continuation.resume(returning: $0) } }
        }
        let applied = try await poll(upTo: .seconds(20), every: .milliseconds(5)) { b.core.withLockedValue { $0.node.versionVector[log] } >= through }
        try #require(applied, "the operations were not applied before the install")
        gated.open()
        let held = try await install.value.get()
        _ = try await batch.value.get()
        return held
    }

    /// A peer's operations that arrive while a snapshot covering them is being installed wait to
    /// be committed until the install is done, and the journal goes on in a new file by then.
    /// Written there, below what the snapshot covers, they made the log writer's durable
    /// position go backwards and left a hole a reader met after a restart. The install is held
    /// at its rename (``GatedFileSystem``), so the race happens every time.
    @Test func operationsArrivingDuringAnInstallNeitherMoveTheLogBackNorLeaveAHole() async throws {
        let (dirA, dirB) = (try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        let fromA = try await trimmedSource(a)
        let logA = a.peerIdentity.ownLog

        let gated = GatedFileSystem(holdingRenamesTo: "snapshot-")
        var b = try open(dirB.path, node: "node-b", fs: gated)
        try await applyRemote(b, Array(fromA[0..<20]))
        try send(a, to: b)
        // A's next operations arrive while the install is inside the writer's queue.
        guard let held = try await install(b, gated: gated, while: Array(fromA[20..<60]), holding: logA, through: 60) else { return }
        #expect(held[logA] == 4_400)
        #expect(b.durableVector[logA] == 4_400, "the durable position must not go back: \(b.durableVector)")
        // What the snapshot covers is not read from the journal: a peer that lacks it gets the
        // snapshot, where a reader would meet 21...60 and then a hole.
        #expect(throws: JournalReadError.self) { _ = try b.logReader(for: logA, from: 21) }
        await register(b, batches: 3_000..<3_005)
        let before = b.snapshotState()
        b.close()
        b = try open(dirB.path, node: "node-b")
        defer { b.close() }
        #expect(b.snapshotState() == before)
        #expect(b.durableVector[logA] == 4_400)
        // A's log past the snapshot reads on from the journal once A sends more (nothing of it
        // is held here below 4,401 but the snapshot).
        #expect(throws: JournalReadError.self) { _ = try b.logReader(for: logA, from: 21) }
    }

    /// A third node's operations that arrive while a snapshot that does not cover them is being
    /// installed are held after it: the node takes that log's next batch. The install set the
    /// log's position to what the journal held before they came, while the installed state held
    /// them too, so the next batch was refused as a gap, on every reconnection.
    @Test func operationsOfAnotherLogArrivingDuringAnInstallAreHeldAfterIt() async throws {
        let (dirA, dirB, dirC) = (try TemporaryDirectory(), try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB, dirC].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        _ = try await trimmedSource(a)
        let c = try open(dirC.path, node: "node-c")
        defer { c.close() }
        await register(c, batches: 5_000..<5_003)
        let fromC = try ownOperations(c)
        try #require(fromC.count == 60)
        let logC = c.peerIdentity.ownLog

        let gated = GatedFileSystem(holdingRenamesTo: "snapshot-")
        let b = try open(dirB.path, node: "node-b", fs: gated)
        defer { b.close() }
        try await applyRemote(b, Array(fromC[0..<20]))
        try send(a, to: b)
        // C's next operations are applied while the install waits inside the writer's queue, so
        // they are still to commit when it takes the state.
        guard try await install(b, gated: gated, while: Array(fromC[20..<40]), holding: logC, through: 40) != nil else { return }
        #expect(b.core.withLockedValue { $0.node.versionVector[logC] } == 40)
        // The log goes on from 41.
        try await applyRemote(b, Array(fromC[40..<60]))
        #expect(b.durableVector[logC] == 60)
    }

    /// A journal entry that no longer reads back, with intact entries after it in the same file,
    /// refuses the install and leaves the state as it was: the replay stopped there without a
    /// word, and the installed state lacked this node's own acknowledged writes past it.
    @Test func aJournalDamagedPastTheSnapshotRefusesTheInstall() async throws {
        let (dirA, dirB) = (try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        _ = try await trimmedSource(a)
        let b = try open(dirB.path, node: "node-b")
        defer { b.close() }
        await register(b, batches: 1_000..<1_060)
        let files = try CommitJournal.files(in: dirB.path, on: PosixFileSystem())
        let newest = CommitJournal.path(in: dirB.path, number: try #require(files.last))
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: newest)))
        // The first entry of the newest file, which entries follow (a batch of 20 is one commit).
        try #require(files.count > 1 && bytes.count > 4 * 1_024)
        bytes[JournalEntry.headerBytes + 5] ^= 0x10
        try Data(bytes).write(to: URL(fileURLWithPath: newest))
        let before = b.snapshotState()
        let ownBefore = b.durableVector[b.peerIdentity.ownLog]
        try send(a, to: b)
        guard case .failure(let refusal) = b.installIncomingSnapshot() else {
            Issue.record("a snapshot was installed over a damaged journal")
            return
        }
        #expect(refusal.code == .snapshotRefused && refusal.message.contains("does not read back"), "\(refusal.message)")
        #expect(b.snapshotState() == before)
        #expect(b.durableVector[b.peerIdentity.ownLog] == ownBefore)

        // A journal file cut short inside what was made durable is refused too: the replay read
        // it up to its end and stopped there without a word.
        try Data(bytes.prefix(100)).write(to: URL(fileURLWithPath: newest))
        try send(a, to: b)
        guard case .failure(let truncated) = b.installIncomingSnapshot() else {
            Issue.record("a snapshot was installed over a truncated journal")
            return
        }
        #expect(truncated.message.contains("fewer than"), "\(truncated.message)")
        #expect(b.snapshotState() == before)
    }

    /// A snapshot whose clock is further ahead of this node's wall clock than a peer's timestamp
    /// may be is refused, and nothing changes: installed, it moved the node's clock there, and the
    /// node refused every write until real time caught up, across restarts too. Here the node's
    /// wall clock is a day behind the peer's.
    @Test func aSnapshotWhoseClockIsTooFarAheadIsRefused() async throws {
        let (dirA, dirB) = (try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        _ = try await trimmedSource(a)
        let b = try RegistryEngine(configuration: .withoutSnapshots(dirB.path, node: "node-b"), logger: .quiet(), wallClock: { SystemClock.wallMillis() - 86_400_000 })
        defer { b.close() }
        let before = b.snapshotState()
        let durableBefore = b.durableVector
        try send(a, to: b)
        guard case .failure(let refusal) = b.installIncomingSnapshot() else {
            Issue.record("a snapshot a day ahead of the node's clock was installed")
            return
        }
        #expect(refusal.code == .snapshotRefused && refusal.retryable && refusal.message.contains("ahead of this node's wall clock"), "\(refusal.message)")
        #expect(b.snapshotState() == before && b.durableVector == durableBefore)
    }

    @Test func aNodeWithItsOwnWritesInstallsAPeersSnapshotAndKeepsItAcrossARestart() async throws {
        let (dirA, dirB, dirC) = (try TemporaryDirectory(), try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB, dirC].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        let fromA = try await trimmedSource(a)
        #expect(fromA.count == 4_400)

        var b = try open(dirB.path, node: "node-b")
        await register(b, batches: 1_000..<1_010)
        let fromB = try ownOperations(b)
        try send(a, to: b)
        let held = try b.installIncomingSnapshot().get()
        #expect(held[a.peerIdentity.ownLog] == 4_400 && held[b.peerIdentity.ownLog] == 200)
        #expect(b.durableVector == held)
        #expect(!FileManager.default.fileExists(atPath: b.snapshots.incomingPath), "renamed into place")
        // A's log is not in B's journal: a reader must be refused, as on A.
        #expect(throws: JournalReadError.self) { _ = try b.logReader(for: a.peerIdentity.ownLog, from: 1) }

        // The oracle: C got every operation through replication.
        let c = try open(dirC.path, node: "node-c")
        defer { c.close() }
        try await applyRemote(c, fromA)
        try await applyRemote(c, fromB)
        #expect(b.snapshotState() == c.snapshotState())

        // B goes on writing, restarts, and still holds it all.
        await register(b, batches: 2_000..<2_005)
        let before = b.snapshotState()
        let written = b.peerIdentity.ownLog
        b.close()
        b = try open(dirB.path, node: "node-b")
        defer { b.close() }
        #expect(b.snapshotState() == before)
        // The restart opened a new epoch; the one B wrote in stays held and readable.
        #expect(b.peerIdentity.ownLog != written && b.durableVector[b.peerIdentity.ownLog] == 0)
        #expect(b.durableVector[a.peerIdentity.ownLog] == 4_400 && b.durableVector[written] == 300)
        #expect(throws: JournalReadError.self) { _ = try b.logReader(for: a.peerIdentity.ownLog, from: 4_400) }
        #expect(try b.logReader(for: written, from: 1).next(atMost: 1_000).count == 300)
    }

    @Test func aDamagedSnapshotIsRefusedAndChangesNothing() async throws {
        let (dirA, dirB) = (try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        _ = try await trimmedSource(a)
        let b = try open(dirB.path, node: "node-b")
        defer { b.close() }
        await register(b, batches: 1_000..<1_002)
        let before = b.snapshotState()
        try send(a, to: b)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: b.snapshots.incomingPath))
        bytes[bytes.count / 2] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: b.snapshots.incomingPath))
        expectRefused(b, saying: "damaged", before: before)
        #expect(b.durableVector[a.peerIdentity.ownLog] == 0)
    }

    /// The case the simulation found: B trimmed operations of its own log that A holds, but A's
    /// newest snapshot predates them. B cannot combine the two: it refuses, typed, and keeps its
    /// state; a newer snapshot of A covers them, and B installs that one.
    @Test func aSnapshotRefusedAsTooOldIsTakenAgainAndThenInstalled() async throws {
        let (dirA, dirB, dirC) = (try TemporaryDirectory(), try TemporaryDirectory(), try TemporaryDirectory())
        defer { [dirA, dirB, dirC].forEach { $0.remove() } }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        let fromA = try await trimmedSource(a)
        let b = try open(dirB.path, node: "node-b")
        defer { b.close() }
        let fromB = try await trimmedSource(b)
        // A holds all of B's log, after its own newest snapshot.
        try await applyRemote(a, fromB)
        try send(a, to: b)
        expectRefused(b, saying: "no longer holds", before: b.snapshotState())
        try await snapshot(a)
        try send(a, to: b)
        let held = try b.installIncomingSnapshot().get()
        #expect(held[a.peerIdentity.ownLog] == 4_400 && held[b.peerIdentity.ownLog] == 4_400)
        let c = try open(dirC.path, node: "node-c")
        defer { c.close() }
        try await applyRemote(c, fromA)
        try await applyRemote(c, fromB)
        #expect(b.snapshotState() == c.snapshotState())
    }

    /// A node that dies at any step of an install (each call that would change its disk, in turn)
    /// restarts to its old state or to the installed one, never to anything between.
    @Test func aCrashAtAnyStepOfAnInstallRestartsToTheOldStateOrTheNew() async throws {
        let dirA = try TemporaryDirectory()
        defer { dirA.remove() }
        let a = try open(dirA.path, node: "node-a")
        defer { a.close() }
        _ = try await trimmedSource(a)
        let newest = try #require(try a.snapshots.openNewest())
        let snapshotBytes = try newest.read(at: 0, count: newest.bytes)
        newest.close()

        /// B on a simulated disk, with its own writes and A's snapshot received, its clock fixed
        /// so that every run decides alike; the install fails after `steps` more disk changes.
        func nodeB(crashingAfter steps: Int?) async throws -> (RegistryEngine, CrashingFileSystem) {
            let disk = CrashingFileSystem(SimulatedFileSystem(), failingAfter: .max)
            var configuration = NodeConfiguration()
            configuration.clusterSecret = "test cluster secret"
            configuration.dataDirectory = "/data"
            configuration.nodeID = try NodeID("node-b")
            configuration.journalFileBytes = 32 << 10
            configuration.snapshotEveryOperations = 0
            configuration.snapshotEverySeconds = 0
            let b = try RegistryEngine(configuration: configuration, logger: .quiet(), wallClock: { 1_800_000_000_000 }, fs: disk)
            await register(b, batches: 1_000..<1_010)
            let file = try disk.inner.open(b.snapshots.incomingPath, create: true)
            try disk.inner.write(file, snapshotBytes, at: 0)
            try disk.inner.sync(file)
            disk.inner.close(file)
            if let steps { disk.failingAfter = disk.calls + steps }
            return (b, disk)
        }
        func reopened(_ disk: CrashingFileSystem, seed: UInt64) throws -> RegistryState.Snapshot {
            var tearing: SplitMix64? = SplitMix64(seed: seed)
            disk.inner.crash(tearing: &tearing)
            var configuration = NodeConfiguration()
            configuration.clusterSecret = "test cluster secret"
            configuration.dataDirectory = "/data"
            let engine = try RegistryEngine(configuration: configuration, logger: .quiet(), fs: disk.inner)
            defer { engine.close() }
            return engine.snapshotState()
        }

        let (whole, wholeDisk) = try await nodeB(crashingAfter: nil)
        let before = whole.snapshotState()
        _ = try whole.installIncomingSnapshot().get()
        let after = whole.snapshotState()
        #expect(after != before)
        #expect(try reopened(wholeDisk, seed: 0) == after, "a crash after the install keeps it")
        var steps = 0
        var sawOld = false
        var sawNew = false
        while true {
            let (b, disk) = try await nodeB(crashingAfter: steps)
            let outcome = b.installIncomingSnapshot()
            let state = try reopened(disk, seed: UInt64(steps))
            #expect(state == before || state == after, "a crash after \(steps) disk changes of the install")
            sawOld = sawOld || state == before
            sawNew = sawNew || state == after
            if case .success = outcome { break }
            steps += 1
            try #require(steps < 100)
        }
        print("install crash points: \(steps) disk changes; old state seen \(sawOld), new state seen \(sawNew)")
        #expect(sawOld && sawNew && steps > 3, "the install changed the disk \(steps) times")
    }

    /// `b` refuses the snapshot it was sent, typed and saying `reason`, and keeps the state `before`.
    func expectRefused(_ b: RegistryEngine, saying reason: String, before: RegistryState.Snapshot) {
        #expect {
            _ = try b.installIncomingSnapshot().get()
        } throws: { error in
            (error as? WireError)?.code == .snapshotRefused && (error as? WireError)?.message.contains(reason) == true
        }
        #expect(b.snapshotState() == before)
    }
}
