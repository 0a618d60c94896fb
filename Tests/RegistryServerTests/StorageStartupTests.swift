import Logging
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Start-up over the simulated disk: the newest usable snapshot, then the journal past it, into
/// the state that applying every operation in order gives; and the documented refusal, with a
/// message, for each kind of damage, never a crash or a silently smaller state.
@Suite struct StorageStartupTests {
    static let node = NodeID(trusted: "node-a")
    /// The identifier key fingerprint these directories are written with.
    static let identifierKey: UInt64 = 0x5eed
    static let epoch: UInt64 = 7

    /// `count` seeded operations of node-a's log: devices return, gain apps and merge.
    func operations(count: Int, seed: UInt64, origin: NodeID = node, epoch: UInt64 = epoch) throws -> [LoggedOperation] {
        var generator = SplitMix64(seed: seed)
        let rules = try VendorRules()
        var state = RegistryState()
        var clock = HybridLogicalClock()
        let pool = (0..<max(count / 2, 1)).map { _ in UUID128(high: generator.next() | 1, low: generator.next()) }
        return try (0..<count).map { step in
            var presented = [PresentedIdentifier(rawKind: 2, text: pool[Int(generator.next() % UInt64(pool.count))].text)]
            if generator.next() % 2 == 0 {
                presented.append(PresentedIdentifier(rawKind: 1, text: pool[Int(generator.next() % UInt64(pool.count))].text))
            }
            let registration = try Registration(bundle: ["com.v.a", "com.v.b", "org.w.c"][Int(generator.next() % 3)], identifiers: presented, rules: rules)
            let now = clock.tick(wallMillis: UInt64(1_000 + step))
            let op = state.register(registration, at: now, origin: origin) { _ in DeviceID.mint(at: now, using: &generator) }.operation
            return LoggedOperation(origin: origin, epoch: epoch, sequence: UInt64(step + 1), timestamp: now, operation: .registration(op))
        }
    }

    /// A data directory on `fs` holding node-a's metadata and `operations` journaled in commits of
    /// `perCommit`, in files of `fileBytes`.
    func journal(_ operations: [LoggedOperation], on fs: SimulatedFileSystem, perCommit: Int = 50, fileBytes: Int = 64 << 10) throws {
        if try NodeMetadataFile.read(from: "/data", on: fs) == nil {
            try NodeMetadataFile.write(NodeMetadata(nodeID: Self.node.value, epoch: Self.epoch, identifierKey: Self.identifierKey), to: "/data", on: fs)
        }
        let next = (try CommitJournal.files(in: "/data", on: fs).last ?? 0) + 1
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: next, fileBytes: fileBytes, index: JournalIndex())
        for start in stride(from: 0, to: operations.count, by: perCommit) {
            let chunk = Array(operations[start..<min(start + perCommit, operations.count)])
            let result = writer.queue.sync { writer.write(chunk, clock: chunk.last!.timestamp, keepingRecords: false) }
            _ = try result.get()
        }
        writer.close()
    }

    func start(_ fs: SimulatedFileSystem, claimSeed: UInt64? = nil) throws(NodeStartupError) -> RecoveredStorage {
        var logger = Logger(label: "startup-test")
        logger.logLevel = .critical
        return try StorageStartup.open(
            fs: fs, directory: "/data", configuredNodeID: nil, identifierKey: Self.identifierKey, expectedDevices: 0, claimSeed: claimSeed,
            wallClock: { 5_000 }, epochEntropy: 0x2A, logger: logger)
    }

    func applied(_ operations: [LoggedOperation]) -> RegistryState {
        var state = RegistryState()
        for operation in operations { state.apply(operation.operation) }
        return state
    }

    func expectRefusal(_ fs: SimulatedFileSystem, mentioning fragment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation) {
            _ = try start(fs)
        } throws: { error in
            "\(error)".contains(fragment)
        }
    }

    @Test func theJournalAloneRebuildsTheStateTheVectorAndTheClock() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 3_000, seed: 1)
        try journal(ops, on: fs)
        fs.crash()
        let recovered = try start(fs)
        #expect(recovered.registry.snapshot() == applied(ops).snapshot())
        #expect(recovered.versionVector.logs.map { "\($0.log)=\($0.sequence)" } == ["node-a/7=3000"])
        #expect(recovered.clock == ops.last!.timestamp)
        // The journal's log was epoch 7; this start writes in a new one, recorded before it serves.
        #expect(recovered.metadata == NodeMetadata(nodeID: "node-a", epoch: 5 << 30 | 0x2A, identifierKey: Self.identifierKey))
        #expect(try NodeMetadataFile.read(from: "/data", on: fs) == recovered.metadata)
        #expect(recovered.replayedOperations == 3_000 && recovered.snapshotLabel == nil)
        #expect(recovered.nextJournalFile == UInt64(recovered.index.files.count) + 1)
    }

    @Test func theIndexesAreSizedForWhatTheJournalMayHoldBeforeItIsReplayed() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 3_000, seed: 4)
        try journal(ops, on: fs)
        var bytes = 0
        for number in try CommitJournal.files(in: "/data", on: fs) { bytes += try fs.readAll(CommitJournal.path(in: "/data", number: number)).count }
        let mayHold = try StorageStartup.devicesTheJournalMayHold(in: "/data", on: fs)
        #expect(mayHold == bytes / StorageStartup.journalBytesPerDevice)
        let recovered = try start(fs)
        // Fewer devices than that were created (operations repeat devices), so the indexes kept
        // the size they were given before the replay, bigger than growing to these devices gives.
        #expect(recovered.registry.deviceCount < mayHold / 2)
        #expect(recovered.registry.indexCapacities == RegistryState(expectedDevices: mayHold).indexCapacities)
        #expect(recovered.registry.indexCapacities != applied(ops).indexCapacities)
    }

    /// A directory cannot tell a clean stop from a restored backup, so every start opens a new
    /// epoch: its time part past the stored one's even when the wall clock reads earlier (a clock
    /// set back), and random bits below it.
    @Test func everyStartOpensANewEpoch() throws {
        let fs = SimulatedFileSystem()
        var logger = Logger(label: "startup-test")
        logger.logLevel = .critical
        var epochs = [UInt64]()
        for wall in [5_000, 5_000, 4_000, 9_000] as [UInt64] {
            let recovered = try StorageStartup.open(
                fs: fs, directory: "/data", configuredNodeID: nil, identifierKey: Self.identifierKey, expectedDevices: 0,
                claimSeed: nil, wallClock: { wall }, epochEntropy: 0x2A, logger: logger)
            epochs.append(recovered.metadata.epoch)
        }
        #expect(epochs.map(EpochRule.seconds) == [5, 6, 7, 9] && epochs.allSatisfy { $0 & 0x3FFF_FFFF == 0x2A })
    }

    /// A copy of the directory put back while the clock reads earlier than the epochs written since
    /// (a clock that ran ahead was set right): the start on the copy gets the same time part as the
    /// start after the copy was taken, and the random bits make it another epoch. The time part
    /// alone named both logs alike, and the cluster held two contents under one name
    /// (docs/cluster.md, "Epochs").
    @Test func aCopyPutBackWhileTheClockIsBehindOpensAnotherEpoch() throws {
        let fs = SimulatedFileSystem()
        var logger = Logger(label: "startup-test")
        logger.logLevel = .critical
        func start(wall: UInt64, entropy: UInt64, on disk: SimulatedFileSystem) throws -> UInt64 {
            try StorageStartup.open(
                fs: disk, directory: "/data", configuredNodeID: nil, identifierKey: Self.identifierKey, expectedDevices: 0,
                claimSeed: nil, wallClock: { wall }, epochEntropy: entropy, logger: logger
            ).metadata.epoch
        }
        _ = try start(wall: 90_000, entropy: 1, on: fs)
        let backup = fs.durableCopy()
        let afterCopy = try start(wall: 10_000, entropy: 2, on: fs)
        let afterRestore = try start(wall: 10_000, entropy: 3, on: backup)
        #expect(EpochRule.seconds(of: afterCopy) == EpochRule.seconds(of: afterRestore) && afterCopy != afterRestore)
    }

    @Test func theEpochRuleKeepsTheTimePartGrowingAndTheEntropyBelowIt() {
        #expect(EpochRule.next(after: nil, wallMillis: 1_795_000_000_123, entropy: .max) == 1_795_000_000 << 30 | 0x3FFF_FFFF)
        // An epoch of the earlier format (the wall clock in milliseconds) is far below the next.
        let old: UInt64 = 1_795_000_000_123
        #expect(EpochRule.seconds(of: EpochRule.next(after: old, wallMillis: 1_795_000_001_000, entropy: 0)) == 1_795_000_001)
        #expect(EpochRule.next(after: old, wallMillis: 1_795_000_001_000, entropy: 0) > old)
        // The clock behind: one past the stored time part.
        let stored = EpochRule.next(after: nil, wallMillis: 50_000, entropy: 9)
        #expect(EpochRule.seconds(of: EpochRule.next(after: stored, wallMillis: 1_000, entropy: 9)) == 51)
        #expect(EpochRule.next(after: nil, wallMillis: 0, entropy: 0) > 0)
    }

    @Test func anEmptyDirectoryGetsANewIdentityAndAnOlderVersionsDirectoryIsRefused() throws {
        let fs = SimulatedFileSystem()
        let fresh = try start(fs)
        #expect(fresh.metadata.epoch == 5 << 30 | 0x2A && fresh.metadata.nodeID.hasPrefix("node-") && fresh.registry.deviceCount == 0)
        #expect(try NodeMetadataFile.read(from: "/data", on: fs) == fresh.metadata)
        let old = SimulatedFileSystem()
        let file = try old.open("/data/registry.sqlite3", create: true)
        old.close(file)
        expectRefusal(old, mentioning: "written by an earlier version")
        let orphan = SimulatedFileSystem()
        try journal(try operations(count: 10, seed: 2), on: orphan)
        try orphan.remove("/data/node.meta")
        expectRefusal(orphan, mentioning: "no node.meta")
    }

    /// Its claim index seeded as the node asks, from the journal alone or from a snapshot (whose
    /// claims then restore in their index's order).
    @Test func aSnapshotAndTheJournalPastItRebuildTheState() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 2_000, seed: 3)
        try journal(Array(ops[..<1_200]), on: fs)
        let fromJournal = try start(fs, claimSeed: 0x5EED)
        #expect(fromJournal.snapshotLabel == nil && fromJournal.registry.claimIndexSeed == 0x5EED)
        // A snapshot through 1,200, then 800 more in the journal.
        let snapshotter = Snapshotter(
            fs: fs, directory: "/data", index: fromJournal.index, nodeID: Self.node, epoch: Self.epoch, expectedDevices: 0,
            claimSeed: 0x5EED, logger: .quiet("t"))
        let taken = try snapshotter.takeNow(through: [LogID(origin: NodeID(trusted: "node-a"), epoch: 7): 1_200], clock: ops[1_199].timestamp, currentFile: .max, devices: 1_200).get()
        #expect(taken.label == 1_200)
        try journal(Array(ops[1_200...]), on: fs)
        let recovered = try start(fs, claimSeed: 0x5EED)
        #expect(recovered.snapshotLabel == 1_200 && recovered.replayedOperations == 800)
        #expect(recovered.registry.claimIndexSeed == 0x5EED)
        #expect(recovered.registry.snapshot() == applied(ops).snapshot())
        #expect(recovered.versionVector[LogID(origin: Self.node, epoch: 7)] == 2_000)
    }

    /// A damaged newest snapshot falls back to the one before (and a longer replay); a
    /// truncated one too. With no usable snapshot and the journal trimmed, the node refuses.
    @Test func damagedSnapshotsFallBackAndWithNoneUsableATrimmedJournalIsRefused() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 1_500, seed: 4)
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 7)
        try journal(Array(ops[..<500]), on: fs, fileBytes: 16 << 10)
        var index = try start(fs).index
        let snapshotter = { (index: JournalIndex) in
            Snapshotter(fs: fs, directory: "/data", index: index, nodeID: Self.node, epoch: Self.epoch, expectedDevices: 0, claimSeed: nil, logger: .quiet("t"))
        }
        _ = try snapshotter(index).takeNow(through: [log: 500], clock: ops[499].timestamp, currentFile: .max, devices: 0).get()
        try journal(Array(ops[500..<1_000]), on: fs, fileBytes: 16 << 10)
        index = try start(fs).index
        let second = try snapshotter(index).takeNow(through: [log: 1_000], clock: ops[999].timestamp, currentFile: .max, devices: 0).get()
        #expect(second.filesRemoved > 0, "files that both kept snapshots cover go")
        try journal(Array(ops[1_000...]), on: fs, fileBytes: 16 << 10)
        #expect(try SnapshotFile.labels(in: "/data", on: fs) == [1_000, 500])

        // A bad checksum in the newest: the older one and a longer replay give the same state.
        let newest = "/data/" + SnapshotFile.name(label: 1_000)
        var bytes = try fs.readAll(newest)
        bytes[bytes.count / 2] ^= 0x10
        try fs.replace(newest, with: bytes, inDirectory: "/data")
        let fellBack = try start(fs)
        #expect(fellBack.snapshotLabel == 500 && fellBack.replayedOperations == 1_000)
        #expect(fellBack.registry.snapshot() == applied(ops).snapshot())

        // Truncated as well: the older one is the only one left, and it is truncated too.
        try fs.replace(newest, with: Array(bytes.prefix(bytes.count / 3)), inDirectory: "/data")
        let older = "/data/" + SnapshotFile.name(label: 500)
        try fs.replace(older, with: Array(try fs.readAll(older).dropLast(9)), inDirectory: "/data")
        expectRefusal(fs, mentioning: "no snapshot is usable")
    }

    /// A corrupt newest snapshot is set aside at start, so that a snapshot of the same
    /// operations (a clean stop's, say) is written anew rather than counted as taken: left in
    /// place, it stayed the newest, and the trim that follows a snapshot kept only it.
    @Test func aCorruptSnapshotIsSetAsideAndOneOfTheSameOperationsIsWrittenAgain() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 1_000, seed: 14)
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 7)
        try journal(Array(ops[..<500]), on: fs)
        let snapshotter = { (index: JournalIndex) in
            Snapshotter(fs: fs, directory: "/data", index: index, nodeID: Self.node, epoch: Self.epoch, expectedDevices: 0, claimSeed: nil, logger: .quiet("t"))
        }
        _ = try snapshotter(try start(fs).index).takeNow(through: [log: 500], clock: ops[499].timestamp, currentFile: .max, devices: 0).get()
        try journal(Array(ops[500...]), on: fs)
        _ = try snapshotter(try start(fs).index).takeNow(through: [log: 1_000], clock: ops[999].timestamp, currentFile: .max, devices: 0).get()
        let newest = "/data/" + SnapshotFile.name(label: 1_000)
        var bytes = try fs.readAll(newest)
        bytes[bytes.count / 2] ^= 0x10
        try fs.replace(newest, with: bytes, inDirectory: "/data")

        let fellBack = try start(fs)
        #expect(fellBack.snapshotLabel == 500 && fellBack.registry.snapshot() == applied(ops).snapshot())
        #expect(try SnapshotFile.labels(in: "/data", on: fs) == [500])
        #expect(try fs.readAll(newest + SnapshotStore.unusableSuffix) == bytes, "kept aside for a look")
        // The state a clean stop snapshots covers the same operations as the corrupt one did.
        let taken = try snapshotter(fellBack.index).takeNow(
            through: [log: 1_000], clock: ops[999].timestamp, currentFile: .max, devices: 0, durable: fellBack.registry
        ).get()
        #expect(taken.label == 1_000 && taken.bytes > 0)
        #expect(try !fs.list("/data").contains { $0.hasSuffix(SnapshotStore.unusableSuffix) }, "a snapshot stands in for it: deleted")
        let restarted = try start(fs)
        #expect(restarted.snapshotLabel == 1_000 && restarted.replayedOperations == 0)
        #expect(restarted.registry.snapshot() == applied(ops).snapshot())

        // Another version's format is not damage: left in place (a rollback, then forward again).
        let path = "/data/" + SnapshotFile.name(label: 1_000)
        var other = try fs.readAll(path)
        other[4] &+= 1
        try fs.replace(path, with: other, inDirectory: "/data")
        #expect(try start(fs).snapshotLabel == 500)
        #expect(try fs.readAll(path) == other)
    }

    /// A snapshot's label says how many operations it covers, not which: a newest one whose label
    /// matches but whose header covers other operations (as a peer's snapshot placed under the
    /// label of what its install replayed beside it) does not count as taken.
    @Test func aSnapshotOfTheNewestsLabelIsSkippedOnlyWhenItCoversTheSameOperations() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 600, seed: 15)
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 7)
        try journal(ops, on: fs)
        let recovered = try start(fs)
        let snapshotter = Snapshotter(
            fs: fs, directory: "/data", index: recovered.index, nodeID: Self.node, epoch: Self.epoch, expectedDevices: 0, claimSeed: nil,
            logger: .quiet("t"))
        let partial = applied(Array(ops[..<400]))
        _ = try snapshotter.takeNow(through: [log: 400], clock: ops[399].timestamp, currentFile: .max, devices: 0, durable: partial).get()
        // Named as if it covered all 600.
        try fs.rename("/data/" + SnapshotFile.name(label: 400), to: "/data/" + SnapshotFile.name(label: 600))
        let again = try snapshotter.takeNow(through: [log: 600], clock: ops[599].timestamp, currentFile: .max, devices: 0, durable: recovered.registry).get()
        #expect(again.bytes > 0, "the snapshot of all 600 was counted as taken")
        let same = try snapshotter.takeNow(through: [log: 600], clock: ops[599].timestamp, currentFile: .max, devices: 0, durable: recovered.registry).get()
        #expect(same.bytes == 0, "one that covers the same operations is not written twice")
        let restarted = try start(fs)
        #expect(restarted.snapshotLabel == 600 && restarted.replayedOperations == 0)
    }

    /// What a killed process left unfinished (a snapshot being written, a peer's being received)
    /// is removed at the next start; the rest stays.
    @Test func unfinishedSnapshotsAreRemovedAtStart() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 100, seed: 16)
        try journal(ops, on: fs)
        for name in ["snapshot-00000000000000000050.snap.tmp", Snapshotter.incomingName, "snapshot-00000000000000000010.snap.unusable"] {
            try fs.replace("/data/" + name, with: [1, 2, 3], inDirectory: "/data")
        }
        let recovered = try start(fs)
        #expect(recovered.registry.snapshot() == applied(ops).snapshot())
        let names = try fs.list("/data")
        #expect(!names.contains { $0.hasSuffix(".snap.tmp") } && !names.contains(Snapshotter.incomingName))
        #expect(names.contains("snapshot-00000000000000000010.snap.unusable"), "one set aside is the operator's to delete")
    }

    @Test func aHoleInTheJournalOrAnUndecodableOperationIsRefused() throws {
        let ops = try operations(count: 300, seed: 5)
        let holed = SimulatedFileSystem()
        try journal(Array(ops[..<100]) + Array(ops[150...]), on: holed)
        expectRefusal(holed, mentioning: "operations 101...150 of node-a/7")

        let garbled = SimulatedFileSystem()
        try journal(Array(ops[..<10]), on: garbled)
        _ = try start(garbled)  // seals file 1
        // An entry whose checksum holds but whose payload is not an operation.
        var segment = LogSegment(origin: "node-a", epoch: 7)
        segment.append(sequence: 11, hlc: 1, payload: [0xFF, 0xFF, 0xFF])
        let writer = try CommitJournal(fs: garbled, directory: "/data", number: 2, index: JournalIndex())
        try writer.append(JournalEntry(segments: [segment], clock: 1))
        expectRefusal(garbled, mentioning: "operation node-a/7/11 does not decode")
    }

    @Test func aTornTailIsDiscardedAndTheFileSealedSoLaterStartsAgree() throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 200, seed: 6)
        try journal(Array(ops[..<150]), on: fs)
        // Half a commit at the end of the last file, as a crash mid-write leaves it.
        let last = CommitJournal.path(in: "/data", number: try CommitJournal.files(in: "/data", on: fs).last!)
        var segment = LogSegment(origin: "node-a", epoch: 7)
        for op in ops[150..<160] { segment.append(sequence: op.sequence, hlc: op.timestamp.rawValue, payload: OperationCodec.encode(op.operation)) }
        var torn = [UInt8]()
        JournalEntry(segments: [segment], clock: 1).encode(into: &torn, file: try CommitJournal.files(in: "/data", on: fs).last!)
        try fs.replace(last, with: try fs.readAll(last) + torn.prefix(torn.count / 2), inDirectory: "/data")
        let first = try start(fs)
        #expect(first.versionVector[LogID(origin: Self.node, epoch: 7)] == 150)
        // The next run writes a new file after the sealed one; another start sees both, whole.
        try journal(Array(ops[150...]), on: fs)
        let second = try start(fs)
        #expect(second.registry.snapshot() == applied(ops).snapshot())
    }

    /// A crash at a random point of a run of commits (the disk keeping a random, torn prefix of
    /// what was not synced) loses nothing acknowledged: every commit that returned is there.
    @Test(arguments: Array(1...30) as [UInt64])
    func aCrashLosesNoAcknowledgedCommit(seed: UInt64) throws {
        let fs = SimulatedFileSystem()
        let ops = try operations(count: 400, seed: seed)
        try NodeMetadataFile.write(NodeMetadata(nodeID: Self.node.value, epoch: Self.epoch, identifierKey: Self.identifierKey), to: "/data", on: fs)
        var random = SplitMix64(seed: seed)
        let crashAt = Int(random.next() % 8)
        let crashing = CrashingFileSystem(fs, failingAfter: 6 + Int(random.next() % 40))
        var acknowledged = 0
        if let writer = try? LogWriter(fs: crashing, directory: "/data", journalFile: 1, fileBytes: 8 << 10, index: JournalIndex()) {
            for start in stride(from: 0, to: ops.count, by: 25) {
                let chunk = Array(ops[start..<(start + 25)])
                guard case .success = writer.queue.sync(execute: { writer.write(chunk, clock: chunk.last!.timestamp, keepingRecords: false) }) else { break }
                acknowledged = start + 25
            }
            writer.close()
        }
        var tearing: SplitMix64? = SplitMix64(seed: seed &+ UInt64(crashAt))
        fs.crash(tearing: &tearing)
        let recovered = try start(fs)
        let held = Int(recovered.versionVector[LogID(origin: Self.node, epoch: 7)])
        #expect(held >= acknowledged, "seed \(seed): \(acknowledged) acknowledged, \(held) recovered")
        #expect(recovered.registry.snapshot() == applied(Array(ops[..<held])).snapshot())
    }
}
