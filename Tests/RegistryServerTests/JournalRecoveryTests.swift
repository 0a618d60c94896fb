import Foundation
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Acknowledged commits that are only in the journal when the process stops or dies: the next start moves them into SQLite.
@Suite(.timeLimit(.minutes(1))) struct JournalRecoveryTests: EngineTesting {
    @Test func commitsOnlyInTheJournalAreRecoveredAtStartAndMovedIntoTheLog() async throws {
        // A real node's operations, taken from its log...
        let source = try TemporaryDirectory()
        defer { source.remove() }
        var deviceIDs = [String]()
        do {
            let engine = try open(source.path)
            for frame in 0..<3 {
                let batch = ClientBody.registerBatch(
                    (0..<40).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(frame) + 1, low: UInt64($0) + 1).text) })
                guard case .registerBatchResult(let items) = await submit(engine, [batch])[0] else { return #expect(Bool(false)) }
                for item in items {
                    guard case .result(let result) = item else { return #expect(Bool(false), "\(item)") }
                    deviceIDs.append(result.deviceID)
                }
            }
            engine.close()
            // The next start moves the run's journal into SQLite.
            try open(source.path).close()
        }
        let (identity, records) = try {
            let log = try OperationLog(directory: try DataDirectory(path: source.path))
            var records = [LogRecord]()
            try log.forEach { records.append($0) }
            return (try log.identity()!, records)
        }()
        #expect(records.count == 120)

        // ...written to another directory's journal only, as a run that died would leave them:
        // over several files (a small rotation size puts each entry in a file of its own), the
        // newest ending in half an entry that was never acknowledged.
        let crashed = try TemporaryDirectory()
        defer { crashed.remove() }
        do {
            let directory = try DataDirectory(path: crashed.path)
            try OperationLog(directory: directory).initialise(identity)
            let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: 2_000)
            for chunk in stride(from: 0, to: records.count, by: 50) {
                var segment = LogSegment(origin: identity.nodeID, epoch: identity.epoch)
                for record in records[chunk..<min(chunk + 50, records.count)] {
                    segment.append(sequence: record.sequence, hlc: record.hlc, payload: record.payload)
                }
                try journal.append(JournalEntry(segments: [segment], clock: records[chunk].hlc))
            }
        }
        #expect(try CommitJournal.files(in: try DataDirectory(path: crashed.path)) == [1, 2, 3])
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: crashed.path + "/journal-000000000003.log"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0x52, 0x52, 0x4A, 0x31, 0xFF, 0x00]))
        try handle.close()

        // Kept to put back later, as if the process died after moving the entries into SQLite
        // but before deleting their files.
        let journalCopy = try Data(contentsOf: URL(fileURLWithPath: crashed.path + "/journal-000000000001.log"))

        let engine = try open(crashed.path)
        #expect(engine.stats().deviceCount == 120 && engine.stats().logOperations == 120)
        for id in deviceIDs {
            guard case .device(let record) = await submit(engine, [.resolve(deviceID: id)])[0] else {
                return #expect(Bool(false), "\(id) was not recovered")
            }
            #expect(record.deviceID == id)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: crashed.path).filter { $0.hasPrefix("journal-") }
        #expect(files == ["journal-000000000004.log"])
        guard case .registerResult = await submit(engine, [.register(RegisterRequest(bundleID: "com.v.b", idfv: idfv1))])[0] else {
            return #expect(Bool(false))
        }
        engine.close()

        // A clean close leaves the run's commit in the journal, not in SQLite: the next start
        // moves it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: crashed.path).filter { $0.hasPrefix("journal-") } == ["journal-000000000004.log"])
        do {
            let log = try OperationLog(directory: try DataDirectory(path: crashed.path))
            #expect(log.recordCount == 120)
        }
        let reopened = try open(crashed.path)
        #expect(reopened.stats().deviceCount == 121 && reopened.stats().logOperations == 121)
        reopened.close()
        do {
            let log = try OperationLog(directory: try DataDirectory(path: crashed.path))
            #expect(log.recordCount == 121)
            #expect(log.lastSequence(origin: identity.nodeID, epoch: identity.epoch) == 121)
        }

        // Recovering entries that are already in SQLite adds nothing: moving them is idempotent.
        try journalCopy.write(to: URL(fileURLWithPath: crashed.path + "/journal-000000000001.log"))
        let again = try open(crashed.path)
        #expect(again.stats().deviceCount == 121 && again.stats().logOperations == 121 && again.stats().logSequence == 121)
        again.close()
    }
}
