import RegistryCore
import RegistryStorage
import RegistryWire
import Testing
@testable import RegistryServer

/// The records a commit hands to the peer links are the operations it wrote: each decodes, as a
/// peer decodes it, to the operation at its place in the log.
@Suite struct LogWriterTests {
    /// `count` operations: runs of node-a's log, `runs` long, with 100 of node-b's between them.
    func operations(count: Int, seed: UInt64, runs: Int = 900) -> [LoggedOperation] {
        var random = SplitMix64(seed: seed)
        var next: [String: UInt64] = [:]
        let vendor = Vendor(trusted: "com.vendor")
        return (0..<count).map { index in
            let origin = index % (runs + 100) < runs ? "node-a" : "node-b"
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

    /// The commit is long enough that node-a's first run is cut into two segments.
    @Test func theRecordsKeptForPeersAreTheOperationsWritten() throws {
        let fs = SimulatedFileSystem()
        let written = operations(count: 6_000, seed: 3, runs: 5_000)
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: 1, fileBytes: 64 << 20, index: JournalIndex())
        defer { writer.close() }
        let result = writer.queue.sync { writer.write(written, clock: written.last!.timestamp, keepingRecords: true) }
        let runs = try result.get().runs
        #expect(runs.allSatisfy { run in run.allSatisfy { $0.log == run[0].log } }, "a run is of one log")
        #expect(runs.map(\.count) == [LogWriter.segmentRecords, 5_000 - LogWriter.segmentRecords, 100, 900])
        let records = runs.flatMap { $0 }
        #expect(records.count == written.count)
        var decoder = OperationDecoder()
        for (record, operation) in zip(records, written) {
            #expect(try PeerOperation(record).decoded(using: &decoder) == operation)
        }
        let unkept = writer.queue.sync { writer.write(Array(written.prefix(3)), clock: written.last!.timestamp, keepingRecords: false) }
        #expect(try unkept.get().runs.isEmpty)
    }

    /// A commit past ``LogWriter/entryBytes`` goes on in another entry: written as one, an entry
    /// past what recovery reads (1 GiB, a stalled disk behind thousands of pipelined batches)
    /// was taken for a torn tail at the next start, and its acknowledged operations dropped.
    /// Here the limit is 64 KiB, and the journal holds every operation, in order, in several
    /// entries of at most the limit and one operation more.
    @Test func aCommitPastTheEntryLimitIsWrittenAsSeveralEntries() throws {
        let fs = SimulatedFileSystem()
        let written = operations(count: 6_000, seed: 5, runs: 5_000)
        let writer = try LogWriter(fs: fs, directory: "/data", journalFile: 1, fileBytes: 64 << 20, index: JournalIndex())
        let limit = 64 << 10
        let result = writer.queue.sync { writer.write(written, clock: written.last!.timestamp, keepingRecords: true, entryBytes: limit) }
        let kept = try result.get().runs.flatMap { $0 }
        writer.close()
        var entries = [JournalEntry]()
        _ = try CommitJournal.recover(in: "/data", on: fs) { (_, entry) throws(StorageError) in entries.append(entry) }
        #expect(entries.count > 5, "\(entries.count) entries")
        let records = try entries.flatMap(\.segments).flatMap { try $0.records() }
        #expect(records == kept, "the records kept for peers are those the journal holds")
        var decoder = OperationDecoder()
        #expect(records.count == written.count)
        for (record, operation) in zip(records, written) {
            #expect(try PeerOperation(record).decoded(using: &decoder) == operation)
        }
        let largest = entries.map { $0.segments.reduce(0) { $0 + $1.bytes.count } }.max() ?? 0
        #expect(largest <= limit + 1_024, "an entry of \(largest) bytes")
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
    /// this node's operations keeps what the journal holds too. The bytes they came in carry a
    /// field this version does not know, which encoding them again would drop.
    @Test func recordsOfPeersOperationsAreTheRecordsTheJournalHolds() throws {
        let fs = SimulatedFileSystem()
        let made = operations(count: 9_000, seed: 5, runs: 5_000)
        let cameInBatches = made.map { operation in
            LoggedOperation(
                origin: operation.origin, epoch: operation.epoch, sequence: operation.sequence, timestamp: operation.timestamp,
                operation: operation.operation, encoded: (OperationCodec.encode(operation.operation) + [0x78, 0x2A])[...])
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
        // The first commit: node-a's 5,000 in two segments, node-b's 100, node-a's 900. The second:
        // node-a's next 3,000, the first 500 of them (5,901 to 6,400) made here.
        #expect(kept.map(\.count) == [LogWriter.segmentRecords, 5_000 - LogWriter.segmentRecords, 100, 900, 3_000])
        #expect(kept.map(\.count) == journaled.map(\.count))
        let madeHere = Set(made[6_000..<6_500].map(\.sequence))
        #expect(kept.joined().allSatisfy { ($0.payload.suffix(2) == [0x78, 0x2A]) != ($0.origin == "node-a" && madeHere.contains($0.sequence)) })
        let differing = zip(kept.joined(), journaled.joined()).filter { $0.0 != $0.1 }.map(\.0.sequence)
        #expect(differing.isEmpty, "records kept unlike the journal's: \(differing.prefix(5))")
    }
}
