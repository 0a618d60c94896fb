import Glibc
import Platform
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Snapshots taken by a forked copy of the node: the file holds the state as it was at the fork,
/// whatever the node did afterwards, and a stream that breaks, lies or stalls is refused.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ForkedSnapshotTests: EngineTesting {
    static let metadataOfTest = SnapshotMetadata(
        nodeID: NodeID(trusted: "node-a"), epoch: 1, clock: HLCTimestamp(rawValue: 1 << 20), versionVector: VersionVector(), devices: 0)

    /// Writes what `forked`'s child sends as snapshot `label` in `directory`, and loads it back.
    func copyAndLoad(_ forked: ForkedSnapshot, label: UInt64, in directory: String, silenceMillis: Int32 = 10_000) throws -> SnapshotStore.Loaded {
        let writer = try SnapshotWriter(
            fs: PosixFileSystem(), directory: directory, label: label, metadata: SnapshotCodec.encode(forked.metadata))
        try forked.copy(into: writer, silenceMillis: silenceMillis)
        try writer.finish()
        return try SnapshotStore.load(label: label, in: directory, on: PosixFileSystem(), expectedDevices: 0, claimSeed: nil)
    }

    /// What copying `child`'s stream into a snapshot threw; nil when it threw nothing, or not a
    /// storage error.
    func refusal(of child: ForkedWriter, in directory: String, silenceMillis: Int32 = 10_000) -> StorageError? {
        do {
            _ = try copyAndLoad(ForkedSnapshot(child: child, metadata: Self.metadataOfTest), label: 1, in: directory, silenceMillis: silenceMillis)
            return nil
        } catch let error as StorageError {
            return error
        } catch {
            return nil
        }
    }

    /// The parent changes the state right after the fork; the snapshot is the state before.
    @Test func theSnapshotIsTheStateAsItWasAtTheFork() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var state = try SnapshotPathTests().sampleState(seed: 7, count: 3_000)
        let expected = state.snapshot()
        let forked = try ForkedSnapshot.start(&state, metadata: Self.metadataOfTest).get()
        // The parent goes on: more devices, merges and apps, in the memory the child reads.
        var generator = SplitMix64(seed: 9)
        for step in 0..<2_000 {
            let registration = try Registration(
                bundle: "com.v.a", identifiers: [PresentedIdentifier(rawKind: 2, text: UUID128(high: UInt64(step) + 1, low: 5).text)],
                rules: try VendorRules())
            let now = HLCTimestamp(rawValue: UInt64(1 << 30) + UInt64(step))
            _ = state.register(registration, at: now, origin: NodeID(trusted: "node-b")) { _ in DeviceID.mint(at: now, using: &generator) }
        }
        let afterwards = state.snapshot()
        #expect(afterwards != expected)
        let loaded = try copyAndLoad(forked, label: 3, in: temp.path)
        #expect(loaded.registry.snapshot() == expected)
        // The child let go of the indexes' pages in its own copy only.
        #expect(state.snapshot() == afterwards)
        #expect(loaded.metadata == Self.metadataOfTest)
    }

    /// The child holds no descriptor of the parent's but 0 to 2 and its pipe: a file and a
    /// socket the parent holds open are closed in the child, so a child that outlives a killed
    /// node keeps none of its sockets or locks.
    @Test func aChildHoldsNoneOfItsParentsDescriptors() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let file = Glibc.open(temp.path + "/held", O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(file >= 0 && socket >= 0)
        defer {
            close(file)
            close(socket)
        }
        // The child writes the number of each descriptor it holds open, as 4 bytes each.
        let child = try ForkedWriter.start { input in
            var sink = PipeSink(descriptor: input)
            for descriptor in Int32(0)..<65_536 where fcntl(descriptor, F_GETFD) != -1 {
                guard sink.write(withUnsafeBytes(of: descriptor) { Array($0) }) else { return false }
            }
            return true
        }.get()
        defer { child.close() }
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4_096)
        reading: while true {
            let outcome = buffer.withUnsafeMutableBytes { child.read(into: $0, timeoutMillis: 20_000) }
            switch outcome {
            case .bytes(let count): bytes += buffer[..<count]
            case .end: break reading
            case .silent, .failed:
                child.stop()
                Issue.record("the child sent nothing for 20 s, or its pipe failed: \(outcome)")
                return
            }
        }
        #expect(child.wait())
        let held = stride(from: 0, to: bytes.count - bytes.count % 4, by: 4).map { offset in
            bytes[offset..<(offset + 4)].withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }
        }
        let beyondStandard = held.filter { $0 > 2 }
        // Exactly one: its pipe.
        #expect(beyondStandard.count == 1, "the child held \(beyondStandard)")
        #expect(!held.contains(file) && !held.contains(socket))
    }

    /// A node killed while its snapshot child runs leaves the data directory's lock free: the
    /// child held no copy of the lock's descriptor (a `flock` lasts while any copy is open).
    @Test func aChildLeavesTheDataDirectoryLockToItsParent() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        // The node's lock, taken as `DataDirectory` takes it; closing it without unlocking is
        // what the kernel does when the node is killed.
        let lock = Glibc.open(temp.path + "/LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        #expect(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        // The child says it runs (its body starts once it has closed what it must), then sleeps.
        let child = try ForkedWriter.start { input in
            var sink = PipeSink(descriptor: input)
            sink.write([1])
            sleep(30)
            return true
        }.get()
        defer {
            child.stop()
            child.close()
        }
        var byte: [UInt8] = [0]
        let started = byte.withUnsafeMutableBytes { child.read(into: $0, timeoutMillis: 20_000) }
        #expect(started == .bytes(1))
        close(lock)
        // Another test's fork or spawn may hold a copy of the lock for a moment: a few tries.
        var locked: DataDirectory?
        for _ in 0..<50 where locked == nil {
            locked = try? DataDirectory(path: temp.path)
            if locked == nil { usleep(100_000) }
        }
        #expect(locked != nil, "a restarted node locks its data directory while the child still runs")
    }

    /// A flag a forked child raises is seen by the parent, without a word through the pipe.
    @Test func aForkSignalRaisedInTheChildIsSeenByTheParent() throws {
        let signal = try #require(ForkSignal())
        #expect(!signal.isRaised)
        let child = try ForkedWriter.start { _ in
            signal.raise()
            return true
        }.get()
        defer { child.close() }
        #expect(child.wait())
        #expect(signal.isRaised)
    }

    /// From the fork, the node holds claims new to it aside; once the child has read the indexes
    /// (at the latest once its snapshot is copied), the next claims move them back into the claim
    /// index. Answers and state are those of a state that never held any.
    @Test func newClaimsAreHeldAsideUntilTheChildHasReadTheIndexes() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var state = try SnapshotPathTests().sampleState(seed: 8, count: 2_000)
        var unheld = state
        let forked = try ForkedSnapshot.start(&state, metadata: Self.metadataOfTest).get()
        #expect(state.holdsClaimsAside)
        var generator = SplitMix64(seed: 10)
        for step in 0..<3_000 {
            if step == 1_000 {
                // The child raises the flag itself, before it writes anything.
                let deadline = SystemClock.monotonicNanos() + 20_000_000_000
                while !forked.childHasReadIndexes, SystemClock.monotonicNanos() < deadline { usleep(1_000) }
                #expect(forked.childHasReadIndexes)
                _ = try copyAndLoad(forked, label: 4, in: temp.path)
            }
            let registration = try Registration(
                bundle: "com.v.a", identifiers: [PresentedIdentifier(rawKind: 2, text: UUID128(high: UInt64(step) + 1, low: 9).text)],
                rules: try VendorRules())
            let now = HLCTimestamp(rawValue: UInt64(1 << 30) + UInt64(step))
            let minted = DeviceID.mint(at: now, using: &generator)
            let held = state.register(registration, at: now, origin: NodeID(trusted: "node-b")) { _ in minted }
            #expect(held == unheld.register(registration, at: now, origin: NodeID(trusted: "node-b")) { _ in minted })
        }
        #expect(!state.holdsClaimsAside, "the held claims did not move back")
        #expect(state.snapshot() == unheld.snapshot())
    }

    /// The snapshots a node takes by itself while registrations go on (eight clients at once, so
    /// that operations are applied but not yet durable when a commit starts one) hold exactly
    /// what their version vectors say: the same state as the journal replayed through that
    /// vector (the oracle), not one operation more or less; by fork, and by `--snapshot-by journal`.
    @Test(arguments: [true, false]) func snapshotsDuringALoadAreTheJournalReplayedThroughTheirVectors(byFork: Bool) async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = temp.path
        configuration.nodeID = try NodeID("node-a")
        // One journal file, never trimmed: the oracle replays it.
        configuration.journalFileBytes = 256 << 20
        configuration.snapshotEveryOperations = 1_500
        configuration.snapshotEverySeconds = 0
        configuration.snapshotsByFork = byFork
        let engine = try RegistryEngine(configuration: configuration, logger: .quiet())
        defer { engine.close() }
        await withTaskGroup(of: Void.self) { group in
            for client in 0..<8 {
                group.addTask {
                    for batch in 0..<75 {
                        let requests = (0..<10).map {
                            RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(client) << 32 | UInt64(batch + 1), low: UInt64($0) + 1).text)
                        }
                        _ = await submit(engine, [.registerBatch(requests)])
                    }
                }
            }
        }
        // The last commit started any snapshot it made due before its answers went.
        for _ in 0..<1_000 where engine.pipeline.snapshots.isRunning {
            try await Task.sleep(for: .milliseconds(10))
        }
        let labels = try SnapshotFile.labels(in: temp.path, on: PosixFileSystem())
        // Usually two or three were due. One at a time runs, so on a busy machine the first may
        // still be running when the load ends, and no commit comes after it to start the next.
        #expect((1...Snapshotter.keeping).contains(labels.count))
        for label in labels {
            let loaded = try SnapshotStore.load(label: label, in: temp.path, on: PosixFileSystem(), expectedDevices: 0, claimSeed: nil)
            let vector = loaded.metadata.versionVector
            var oracle = Replayer(registry: RegistryState(), vector: VersionVector(), limits: vector.sequences)
            try oracle.replay(engine.index.files, in: temp.path, on: PosixFileSystem())
            #expect(oracle.vector == vector)
            let same = loaded.registry.snapshot() == oracle.registry.snapshot()
            #expect(same, "snapshot \(label): \(loaded.registry.slotCount) devices and aliases, the journal through it \(oracle.registry.slotCount)")
        }
    }

    /// A sealed block holding `records`.
    static func sealed(_ records: [[UInt8]]) -> [UInt8] {
        var block = SnapshotBlock()
        for record in records { block.append(record) }
        block.seal()
        return block.bytes
    }

    /// Why the copy refuses as corrupt what a child sends as `pieces`, one write each, or nil
    /// when it is not refused as corrupt.
    func corruptReason(whenTheChildSends pieces: [[UInt8]]) throws -> String? {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let child = try ForkedWriter.start { input in
            var sink = PipeSink(descriptor: input)
            for piece in pieces where !sink.write(piece) { return false }
            return true
        }.get()
        guard case .corrupt(let reason)? = refusal(of: child, in: temp.path) else { return nil }
        return reason
    }

    /// A child whose stream stops inside a block.
    @Test func aStreamThatEndsInsideABlockIsRefused() throws {
        let reason = try corruptReason(whenTheChildSends: [Self.sealed([[1, 2, 3]]), Array(Self.sealed([[4, 5]]).dropLast())])
        #expect(reason?.contains("ends inside a block") == true, "\(String(describing: reason))")
    }

    /// A child whose stream holds something other than a block where one should begin.
    @Test func aStreamOutOfStepIsRefused() throws {
        let reason = try corruptReason(whenTheChildSends: [Self.sealed([[1, 2, 3]]), [UInt8](repeating: 7, count: 40)])
        #expect(reason?.contains("out of step (no block begins at byte") == true, "\(String(describing: reason))")
    }

    /// A child that announces a block longer than any can be.
    @Test func aBlockLongerThanAnyIsRefused() throws {
        var head = Self.sealed([[1]])
        head.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(0x7fff_ffff).littleEndian, toByteOffset: 4, as: UInt32.self) }
        let reason = try corruptReason(whenTheChildSends: [head])
        #expect(reason?.contains("a block of 2147483647 bytes") == true, "\(String(describing: reason))")
    }

    /// Blocks larger than the parent's first buffer, and blocks split across reads at any byte,
    /// reach the file whole and in order.
    @Test func blocksOfAnySizeArriveWholeAndInOrder() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        // A 6 MiB record (more than the parent's 4 MiB buffer), then small blocks written a few
        // bytes at a time, so that heads and records are cut between reads.
        let big = [UInt8]((0..<(6 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let small = (0..<50).map { index in [UInt8](repeating: UInt8(index), count: index * 7) }
        let child = try ForkedWriter.start { input in
            var sink = PipeSink(descriptor: input)
            guard sink.write(Self.sealed([big])) else { return false }
            var stream = [UInt8]()
            for index in stride(from: 0, to: small.count, by: 5) { stream += Self.sealed(Array(small[index..<(index + 5)])) }
            var offset = 0
            while offset < stream.count {
                let end = min(stream.count, offset + 13)
                guard sink.write(Array(stream[offset..<end])) else { return false }
                offset = end
            }
            return true
        }.get()
        let writer = try SnapshotWriter(fs: PosixFileSystem(), directory: temp.path, label: 1, metadata: [9])
        try ForkedSnapshot(child: child, metadata: Self.metadataOfTest).copy(into: writer, silenceMillis: 10_000)
        let path = try writer.finish()
        var read = [[UInt8]]()
        try SnapshotFile.read(path, on: PosixFileSystem(), metadata: { #expect($0 == [9]) }, record: { read.append(Array($0)) })
        #expect(read.count == 1 + small.count)
        #expect(read.first == big)
        #expect(Array(read.dropFirst()) == small)
    }

    /// A child that sends whole records but then fails: its snapshot is not taken.
    @Test func aChildThatFailsFailsTheSnapshot() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let child = try ForkedWriter.start { input in
            var sink = PipeSink(descriptor: input)
            sink.write(Self.sealed([[1]]))
            return false
        }.get()
        guard case .io(_, let reason)? = refusal(of: child, in: temp.path) else { Issue.record("not refused as an I/O error"); return }
        #expect(reason.contains("failed"))
        #expect(try SnapshotFile.labels(in: temp.path, on: PosixFileSystem()).isEmpty)
    }

    /// A child that stops writing is ended when its silence outlasts the time allowed while it is
    /// stuck: blocked (asleep), or running a window's worth of CPU time without writing (a loop).
    @Test(arguments: [false, true]) func aStuckChildIsEnded(spinning: Bool) throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let child = try ForkedWriter.start { _ in
            if spinning {
                let end = SystemClock.monotonicNanos() + 30_000_000_000
                while SystemClock.monotonicNanos() < end {}
            } else {
                sleep(30)
            }
            return true
        }.get()
        let window: Int32 = spinning ? 300 : 200
        guard case .io(_, let reason)? = refusal(of: child, in: temp.path, silenceMillis: window) else {
            Issue.record("not refused as an I/O error")
            return
        }
        #expect(reason.contains("wrote nothing for \(window) ms"))
        #expect(kill(child.pid, 0) != 0, "the child was ended and reaped")
    }

    /// A child that works slowly, getting a little CPU at a time as it would on a busy node at
    /// `SCHED_IDLE`, is not ended for its silence, though it writes nothing for longer than the
    /// window: it had less than a window's CPU time, and some in each window.
    @Test func aSlowChildIsWaitedFor() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let child = try ForkedWriter.start { _ in
            let end = SystemClock.monotonicNanos() + 1_200_000_000
            while SystemClock.monotonicNanos() < end {
                let burst = SystemClock.monotonicNanos() + 30_000_000
                while SystemClock.monotonicNanos() < burst {}
                usleep(100_000)
            }
            return true
        }.get()
        let refused = refusal(of: child, in: temp.path, silenceMillis: 400)
        if case .io(_, let reason)? = refused {
            #expect(!reason.contains("wrote nothing"), "ended for its silence: \(reason)")
        }
        #expect(kill(child.pid, 0) != 0, "the child was reaped")
    }
}
