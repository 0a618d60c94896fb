import Foundation
import RegistryTestSupport
import Testing
@testable import RegistryStorage

@Suite struct JournalFileTransferTests {
    /// Entry `index`: 60 records of node-a, then (every third entry) 20 of node-b, so merging has
    /// runs of both origins to join and to split.
    func entry(_ index: UInt64) -> JournalEntry {
        var own = LogSegment(origin: "node-a", epoch: 7)
        for sequence in index * 60 + 1...index * 60 + 60 {
            own.append(sequence: sequence, hlc: sequence, payload: (0..<sequence % 40).map { UInt8(truncatingIfNeeded: $0) })
        }
        var segments = [own]
        if index % 3 == 0 {
            var peer = LogSegment(origin: "node-b", epoch: 3)
            for sequence in index * 20 + 1...index * 20 + 20 { peer.append(sequence: sequence, hlc: sequence, payload: [9, 9]) }
            segments.append(peer)
        }
        return JournalEntry(segments: segments, clock: 10_000 + index)
    }

    /// A journal of 64 KiB files holding `count` entries; returns it, still open on its last file.
    func journal(in directory: DataDirectory, entries count: UInt64) throws -> CommitJournal {
        let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: 64 << 10)
        for index in 0..<count { try journal.append(entry(index)) }
        return journal
    }

    func records(_ log: OperationLog) throws -> [LogRecord] {
        var all = [LogRecord]()
        try log.forEach { all.append($0) }
        return all
    }

    /// Moving every finished file step by step, reading 1,000 bytes at a time (so records arrive
    /// in pieces), leaves the log as the start-up's move of the same files does, holds at most a
    /// piece and a record of the file in memory, and accounts for every byte the journal wrote.
    @Test func aStepwiseTransferEqualsTheStartUpMoveAndAccountsForEveryByte() throws {
        let journalDirectory = try TemporaryDirectory(), stepwise = try TemporaryDirectory(), atStartUp = try TemporaryDirectory()
        defer {
            journalDirectory.remove()
            stepwise.remove()
            atStartUp.remove()
        }
        let directory = try DataDirectory(path: journalDirectory.path)
        let journal = try journal(in: directory, entries: 600)
        let finished = 1..<journal.fileNumber
        #expect(finished.count > 4)

        let log = try OperationLog(directory: try DataDirectory(path: stepwise.path))
        var bytes: UInt64 = 0, moved = 0, transactions = 0
        for number in finished {
            let transfer = try JournalFileTransfer(directory: directory, number: number)
            var steps = 0
            while !transfer.isFinished {
                let step = try transfer.step(into: log, segments: 1, readBytes: 1_000)
                if case .moved(let operations) = step {
                    moved += operations
                    transactions += 1
                }
                #expect(transfer.unparsedBytes <= 1_000 + 8_000 && transfer.pendingSegments <= 3)
                steps += 1
                #expect(steps < 10_000)
            }
            #expect(try transfer.step(into: log, segments: 1, readBytes: 1_000) == .finished)
            bytes += transfer.bytes
        }
        // The current file's entries have no marker yet; every finished byte was accounted for.
        var current = 0
        _ = try CommitJournal.recover(in: directory) { (file, entries) throws(StorageError) in
            if file == journal.fileNumber {
                var encoded = [UInt8]()
                for entry in entries { entry.encode(into: &encoded, file: file) }
                current = encoded.count
            }
        }
        #expect(bytes + UInt64(current) == journal.bytesWritten)

        let reference = try OperationLog(directory: try DataDirectory(path: atStartUp.path))
        _ = try CommitJournal.recover(in: directory) { (file, entries) throws(StorageError) in
            guard finished.contains(file) else { return }
            let merged = JournalEntry.merging(entries)
            try reference.append(merged.segments, clock: merged.clock)
        }
        #expect(try records(log) == records(reference))
        #expect(log.recordCount == UInt64(moved) && moved > 0 && transactions > finished.count)
        #expect(try log.persistedClock() == reference.persistedClock())
    }

    /// A transfer cut short (a new process, here) is made again from the file's start, and the
    /// log keeps each record once.
    @Test func aTransferCutShortIsMadeAgainWithoutDuplicates() throws {
        let journalDirectory = try TemporaryDirectory(), logDirectory = try TemporaryDirectory()
        defer {
            journalDirectory.remove()
            logDirectory.remove()
        }
        let directory = try DataDirectory(path: journalDirectory.path)
        _ = try journal(in: directory, entries: 200)
        var movedFirst = 0
        do {
            let log = try OperationLog(directory: try DataDirectory(path: logDirectory.path))
            let transfer = try JournalFileTransfer(directory: directory, number: 1)
            while movedFirst == 0 || transfer.pendingSegments == 0 {
                if case .moved(let operations) = try transfer.step(into: log, segments: 1, readBytes: 4_096) { movedFirst += operations }
            }
            #expect(!transfer.isFinished)
        }
        let log = try OperationLog(directory: try DataDirectory(path: logDirectory.path))
        #expect(log.recordCount == UInt64(movedFirst))
        let again = try JournalFileTransfer(directory: directory, number: 1)
        while !again.isFinished { _ = try again.step(into: log, segments: 2, readBytes: 1 << 20) }
        let all = try records(log)
        #expect(all.count == Set(all.map { "\($0.origin)/\($0.epoch)/\($0.sequence)" }).count)
        #expect(log.recordCount == UInt64(all.count) && all.count > movedFirst)
    }

    /// The file being written has no rotation marker, and a damaged one fails its checksum:
    /// either is refused as not finished, and nothing after the damage is moved.
    @Test func anUnfinishedOrDamagedFileIsRefused() throws {
        let journalDirectory = try TemporaryDirectory(), logDirectory = try TemporaryDirectory()
        defer {
            journalDirectory.remove()
            logDirectory.remove()
        }
        let directory = try DataDirectory(path: journalDirectory.path)
        let journal = try journal(in: directory, entries: 200)
        let log = try OperationLog(directory: try DataDirectory(path: logDirectory.path))
        func transferAll(_ number: UInt64) throws {
            let transfer = try JournalFileTransfer(directory: directory, number: number)
            while !transfer.isFinished { _ = try transfer.step(into: log, segments: 2, readBytes: 1 << 20) }
        }
        do {
            try transferAll(journal.fileNumber)
            Issue.record("the current file was moved as finished")
        } catch {
            #expect("\(error)".contains("does not end with its rotation marker (its records stop at byte"), "\(error)")
        }
        // Flip a byte in the middle of file 1.
        let path = journalDirectory.path + "/journal-000000000001.log"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        do {
            try transferAll(1)
            Issue.record("a damaged file was moved")
        } catch {
            #expect("\(error)".contains("journal-000000000001.log does not end with its rotation marker (a checksum mismatch at byte"), "\(error)")
        }
        #expect(throws: StorageError.self) { try JournalFileTransfer(directory: directory, number: 99) }
    }
}
