@testable import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// The two-thread start-up replay must rebuild exactly what applying the log in order on one
/// thread builds, across many hand-over chunks, and must stop cleanly on a bad record.
@Suite(.timeLimit(.minutes(1))) struct LogReplayTests {
    static let identity = NodeIdentity(nodeID: "node-a", epoch: 7)

    /// `count` registrations of node-a, seeded: identifiers come from a pool smaller than the
    /// count, so devices return, gain apps and merge.
    func ownRecords(count: Int, seed: UInt64) throws -> [LogRecord] {
        var generator = SplitMix64(seed: seed)
        let rules = try VendorRules()
        var state = RegistryState()
        var clock = HybridLogicalClock()
        let pool = (0..<count / 2).map { _ in UUID128(high: generator.next() | 1, low: generator.next()) }
        var records = [LogRecord]()
        for step in 0..<count {
            var presented = [PresentedIdentifier(rawKind: 2, text: pool[Int(generator.next() % UInt64(pool.count))].text)]
            if generator.next() % 2 == 0 {
                presented.append(PresentedIdentifier(rawKind: 1, text: pool[Int(generator.next() % UInt64(pool.count))].text))
            }
            let bundle = ["com.v.a", "com.v.b", "org.w.c"][Int(generator.next() % 3)]
            let registration = try Registration(bundle: bundle, identifiers: presented, rules: rules)
            let now = clock.tick(wallMillis: UInt64(1_000 + step))
            let op = state.register(registration, at: now, origin: NodeID(trusted: Self.identity.nodeID)) {
                DeviceID.mint(at: now, using: &generator)
            }.operation
            records.append(
                LogRecord(
                    origin: Self.identity.nodeID, epoch: Self.identity.epoch, sequence: UInt64(step + 1), hlc: now.rawValue,
                    payload: OperationCodec.encode(.registration(op))))
        }
        return records
    }

    @Test func replayOnTwoThreadsBuildsWhatApplyingInOrderBuilds() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.initialise(Self.identity)
        let own = try ownRecords(count: 3 * LogReplay.chunkSize + 123, seed: 11)
        for start in stride(from: 0, to: own.count, by: 1_000) {
            try log.append(Array(own[start..<min(start + 1_000, own.count)]), clock: 0)
        }
        // A few records of another origin with a newer clock: they are applied, but do not
        // count as this node's sequence.
        let peer = try ownRecords(count: 10, seed: 12).map {
            LogRecord(origin: "node-b", epoch: 3, sequence: $0.sequence, hlc: $0.hlc + (1 << 40), payload: $0.payload)
        }
        try log.append(peer, clock: 0)

        var reference = RegistryState()
        try log.forEach { (record) throws(StorageError) in
            guard let operation = try? OperationCodec.decode(record.payload) else { throw .corrupt("test record") }
            reference.apply(operation)
        }
        let outcome = try LogReplay.run(log, identity: Self.identity, expectedDevices: 100_000)
        #expect(outcome.registry.indexCapacities == (1 << 18, 1 << 19), "sized for 100,000 devices from the start")
        // Compared as a Bool: printing two differing snapshots of 12,000 devices floods the log.
        let identical = outcome.registry.snapshot() == reference.snapshot()
        #expect(
            identical,
            "replayed \(outcome.registry.deviceCount) devices and \(outcome.registry.aliasCount) aliases; applying in order gave \(reference.deviceCount) and \(reference.aliasCount)")
        #expect(reference.aliasCount > 0, "the records should include merges")
        #expect(outcome.lastOwnSequence == UInt64(own.count))
        #expect(outcome.newest.rawValue == peer.map(\.hlc).max())
        // The version vector: every operation of each log is held, up to its last.
        #expect(outcome.versionVector.logs.map { "\($0.log)=\($0.sequence)" } == ["node-a/7=\(own.count)", "node-b/3=10"])
    }

    /// A log whose sequence jumps has lost operations: the node refuses to serve a state with
    /// holes, and says which log and where.
    @Test func aLogWithAHoleIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.initialise(Self.identity)
        let records = try ownRecords(count: 20, seed: 9)
        try log.append(Array(records[0..<10]) + Array(records[12...]), clock: 0)
        #expect(throws: StorageError.corrupt("the log of node-a/7 goes from operation 10 to 13: operations are missing")) {
            _ = try LogReplay.run(log, identity: Self.identity)
        }
    }

    @Test func thePersistedClockWinsWhenItIsNewer() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.initialise(Self.identity)
        let records = try ownRecords(count: 20, seed: 5)
        let clock = records.map(\.hlc).max()! + 12_345
        try log.append(records, clock: clock)
        let outcome = try LogReplay.run(log, identity: Self.identity)
        #expect(outcome.newest.rawValue == clock)
        #expect(outcome.registry.deviceCount > 0)
        // An empty log replays to an empty state.
        let empty = try TemporaryDirectory()
        defer { empty.remove() }
        let fresh = try LogReplay.run(try OperationLog(directory: try DataDirectory(path: empty.path)), identity: Self.identity)
        #expect(fresh.registry.deviceCount == 0 && fresh.lastOwnSequence == 0 && fresh.newest == .zero)
    }

    /// A record that does not decode, after more than a chunk of good ones (so the applier is
    /// busy when the reader fails), ends the replay with an error naming it, not a hang.
    @Test func aRecordThatDoesNotDecodeEndsTheReplayWithItsName() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.initialise(Self.identity)
        var records = try ownRecords(count: LogReplay.chunkSize + 10, seed: 3)
        records.append(
            LogRecord(
                origin: Self.identity.nodeID, epoch: Self.identity.epoch, sequence: UInt64(records.count + 1), hlc: 1,
                payload: [0xFF, 0xFF, 0xFF]))
        try log.append(records, clock: 0)
        #expect {
            _ = try LogReplay.run(log, identity: Self.identity)
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.hasPrefix("node-a/7/\(records.count):")
        }
    }
}
