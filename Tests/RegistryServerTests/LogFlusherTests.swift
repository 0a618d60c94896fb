import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import RegistryStorage
import RegistryTestSupport
import Testing
@testable import RegistryServer

@Suite(.timeLimit(.minutes(1))) struct LogFlusherTests {
    func entry(_ sequences: ClosedRange<UInt64>) -> JournalEntry {
        var segment = LogSegment(origin: "node-a", epoch: 7)
        for sequence in sequences { segment.append(sequence: sequence, hlc: sequence, payload: [UInt8(sequence)]) }
        return JournalEntry(segments: [segment], clock: sequences.upperBound)
    }

    /// Journals `count` entries of three records each, one file per entry (a rotation after
    /// every entry), and hands each to `flusher`.
    func journalAndHand(_ count: UInt64, to flusher: LogFlusher, in directory: DataDirectory) throws -> CommitJournal {
        let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: 1)
        for index in 0..<count {
            let written = entry((index * 3 + 1)...(index * 3 + 3))
            try flusher.hand(written, file: try journal.append(written))
        }
        return journal
    }

    func journalFiles(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasPrefix("journal-") }.sorted()
    }

    /// Past its limit a hand-over flushes at once (the delay here is an hour), moving the entries
    /// into the log and deleting the journal files before the newest; close deletes the rest.
    @Test func aHandOverPastTheLimitFlushesAtOnceAndCloseLeavesNoJournal() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let directory = try DataDirectory(path: temp.path)
            let flusher = LogFlusher(
                log: try OperationLog(directory: directory), directory: directory, delay: .seconds(3_600), maxPendingBytes: 0)
            let journal = try journalAndHand(3, to: flusher, in: directory)
            #expect(try journalFiles(temp.path) == ["journal-000000000003.log"])
            flusher.close(journalFile: journal.fileNumber)
            #expect(try journalFiles(temp.path).isEmpty)
        }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        #expect(log.recordCount == 9)
        #expect(try log.persistedClock() == 9)
    }

    /// From `flushBytes` a flush starts at once, in the background (the delay here is an hour).
    @Test func pendingBytesPastTheFlushThresholdFlushWithoutTheDelay() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let flusher = LogFlusher(
            log: try OperationLog(directory: directory), directory: directory, delay: .seconds(3_600), flushBytes: 1)
        let journal = try journalAndHand(2, to: flusher, in: directory)
        var waited = 0
        while try journalFiles(temp.path).count > 1, waited < 100 {
            Thread.sleep(forTimeInterval: 0.05)
            waited += 1
        }
        #expect(try journalFiles(temp.path) == ["journal-000000000002.log"])
        flusher.close(journalFile: journal.fileNumber)
    }

    /// When SQLite fails (here its WAL descriptor is pointed at /dev/full, so its next write
    /// reports a full disk), the journal keeps the entries and the next hand-over reports it.
    @Test func aFailedFlushKeepsTheJournalAndIsReportedByTheNextHandOver() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let flusher = LogFlusher(
            log: try OperationLog(directory: directory), directory: directory, delay: .seconds(3_600), maxPendingBytes: 0)
        let journal = try journalAndHand(2, to: flusher, in: directory)
        #expect(try journalFiles(temp.path) == ["journal-000000000002.log"])

        let walPath = temp.path + "/registry.sqlite3-wal"
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap(Int32.init)
        let wal = descriptors.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == walPath }
        #expect(wal.count == 1)
        let full = open("/dev/full", O_WRONLY)
        defer { close(full) }
        for descriptor in wal { dup2(full, descriptor) }

        let third = entry(7...9)
        try flusher.hand(third, file: try journal.append(third))  // this flush fails
        #expect(throws: StorageError.self) {
            let fourth = entry(10...12)
            try flusher.hand(fourth, file: try journal.append(fourth))
        }
        // Nothing the failed flush held was retired: the journal still has it for the restart.
        #expect(try journalFiles(temp.path) == ["journal-000000000002.log", "journal-000000000003.log", "journal-000000000004.log"])
        let recovered = try CommitJournal.recover(in: directory)
        #expect(recovered.entries.map(\.clock) == [6, 9, 12])
        flusher.close(journalFile: journal.fileNumber)
    }

    /// A flush syncs SQLite's WAL only when journal files are retired after it: the first flush,
    /// and then one that includes an entry of a newer file. Here every hand-over flushes before
    /// it returns (`maxPendingBytes` 0), so the log is idle when the test reads its sync level.
    @Test func onlyAFlushThatRetiresJournalFilesSyncsTheLog() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let log = try OperationLog(directory: directory)
        let flusher = LogFlusher(log: log, directory: directory, delay: .seconds(3_600), maxPendingBytes: 0)
        try flusher.hand(entry(1...3), file: 1)
        #expect(try log.synchronousLevel() == "2")
        try flusher.hand(entry(4...6), file: 1)
        #expect(try log.synchronousLevel() == "1")
        try flusher.hand(entry(7...9), file: 1)
        #expect(try log.synchronousLevel() == "1")
        try flusher.hand(entry(10...12), file: 2)
        #expect(try log.synchronousLevel() == "2")
        try flusher.hand(entry(13...15), file: 2)
        #expect(try log.synchronousLevel() == "1")
        flusher.close(journalFile: 2)
        #expect(try log.synchronousLevel() == "2")
        #expect(log.recordCount == 15)
    }

    /// Below the limit nothing is flushed until the delay has passed; the journal keeps it.
    @Test func belowTheLimitEntriesWaitForTheDelay() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let flusher = LogFlusher(log: try OperationLog(directory: directory), directory: directory, delay: .milliseconds(300))
        let journal = try journalAndHand(2, to: flusher, in: directory)
        #expect(try journalFiles(temp.path) == ["journal-000000000001.log", "journal-000000000002.log"])
        Thread.sleep(forTimeInterval: 1)
        #expect(try journalFiles(temp.path) == ["journal-000000000002.log"])
        flusher.close(journalFile: journal.fileNumber)
    }
}
