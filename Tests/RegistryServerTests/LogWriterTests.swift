import RegistryCore
import RegistryStorage
import RegistryWire
import Testing
@testable import RegistryServer

/// The records a commit hands to the peer links are the operations it wrote: each decodes, as a
/// peer decodes it, to the operation at its place in the log. The commit is long enough that one
/// log's run is cut into several segments.
@Suite struct LogWriterTests {
    func operations(count: Int, seed: UInt64) -> [LoggedOperation] {
        var random = SplitMix64(seed: seed)
        var next: [String: UInt64] = [:]
        let vendor = Vendor(trusted: "com.vendor")
        return (0..<count).map { index in
            // Long runs of node-a's log with node-b's operations between them.
            let origin = index % 1_000 < 900 ? "node-a" : "node-b"
            let sequence = next[origin, default: 0] + 1
            next[origin] = sequence
            let node = NodeID(trusted: origin)
            let stamp = HLCTimestamp(millis: 1_000 + UInt64(index), counter: 0)
            let device = DeviceRef(
                id: DeviceID(UUID128(high: random.next(), low: random.next())), created: stamp, origin: node, vendor: vendor)
            let op = RegistrationOp(
                device: device, bundle: try! BundleID(parsing: "com.vendor.app\(index % 3)"),
                claims: [Identifier(kind: .idfv, value: UUID128(high: random.next(), low: random.next()))], merged: [], seen: stamp)
            return LoggedOperation(origin: node, epoch: 1, sequence: sequence, timestamp: stamp, operation: .registration(op))
        }
    }

    @Test func theRecordsKeptForPeersAreTheOperationsWritten() throws {
        let fs = SimulatedFileSystem()
        let written = operations(count: 5_000, seed: 3)
        #expect(written.filter { $0.origin.value == "node-a" }.count > LogWriter.segmentRecords)
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: 1, fileBytes: 64 << 20, index: JournalIndex())
        defer { writer.close() }
        let result = writer.queue.sync { writer.write(written, clock: written.last!.timestamp, keepingRecords: true) }
        let runs = try result.get().runs
        #expect(runs.allSatisfy { run in run.allSatisfy { $0.log == run[0].log } }, "a run is of one log")
        let records = runs.flatMap { $0 }
        #expect(records.count == written.count)
        var decoder = OperationDecoder()
        for (record, operation) in zip(records, written) {
            #expect(try PeerOperation(record).decoded(using: &decoder) == operation)
        }
        let unkept = writer.queue.sync { writer.write(Array(written.prefix(3)), clock: written.last!.timestamp, keepingRecords: false) }
        #expect(try unkept.get().runs.isEmpty)
    }

    /// A peer's operation is journaled as it came (``LoggedOperation/encoded``), a field this
    /// version does not know included; one this node made is encoded.
    @Test func aPeersOperationIsJournaledAsItCame() throws {
        let fs = SimulatedFileSystem()
        let made = operations(count: 40, seed: 4)
        // Field 15 of `Operation`, a varint this version does not have, after what it encodes.
        let written = made.enumerated().map { index, operation in
            guard index % 2 == 0 else { return operation }
            return LoggedOperation(
                origin: operation.origin, epoch: operation.epoch, sequence: operation.sequence, timestamp: operation.timestamp,
                operation: operation.operation, encoded: (OperationCodec.encode(operation.operation) + [0x78, 0x2A])[...])
        }
        #expect(written == made, "the bytes it came in are not part of the value")
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: 1, fileBytes: 64 << 20, index: JournalIndex())
        defer { writer.close() }
        let records = try writer.queue.sync { writer.write(written, clock: written.last!.timestamp, keepingRecords: true) }.get().runs
            .flatMap { $0 }
        #expect(records.count == written.count)
        for (record, operation) in zip(records, written) {
            let expected = operation.encoded.map(Array.init) ?? OperationCodec.encode(operation.operation)
            #expect(Array(record.payload) == expected)
            #expect(try OperationCodec.decode(record.payload) == operation.operation)
        }
    }

    /// A commit of peers' operations alone keeps, for the peer links, records made from the
    /// bytes they came in rather than from a copy of the entry: they must be the records the
    /// journal holds, segment by segment, read back from its file. A commit that mixes them with
    /// this node's operations keeps what the journal holds too.
    @Test func recordsOfPeersOperationsAreTheRecordsTheJournalHolds() throws {
        let fs = SimulatedFileSystem()
        let made = operations(count: 9_000, seed: 5)
        let cameInBatches = made.map { operation in
            LoggedOperation(
                origin: operation.origin, epoch: operation.epoch, sequence: operation.sequence, timestamp: operation.timestamp,
                operation: operation.operation, encoded: OperationCodec.encode(operation.operation)[...])
        }
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: 1, fileBytes: 64 << 20, index: JournalIndex())
        let commits = [Array(cameInBatches[..<6_000]), Array(made[6_000..<6_500]) + Array(cameInBatches[6_500...])]
        var kept = [[LogRecord]]()
        for commit in commits {
            kept += try writer.queue.sync { writer.write(commit, clock: commit.last!.timestamp, keepingRecords: true) }.get().runs
        }
        writer.close()
        var journaled = [[LogRecord]]()
        _ = try CommitJournal.recover(in: "/data", on: fs) { (_, entry) throws(StorageError) in
            for segment in entry.segments { journaled.append(try segment.records()) }
        }
        #expect(kept.count > 4, "several segments: both logs, and node-a's longest run cut in two")
        #expect(kept.map(\.count) == journaled.map(\.count))
        let differing = zip(kept.joined(), journaled.joined()).filter { $0.0 != $0.1 }.map(\.0.sequence)
        #expect(differing.isEmpty, "records kept unlike the journal's: \(differing.prefix(5))")
    }
}
