import Foundation
import RegistryCore
import RegistryTestSupport
import Testing
@testable import RegistryStorage

@Suite struct CommitJournalTests {
    func segment(_ sequences: ClosedRange<UInt64>, origin: String = "node-a", epoch: UInt64 = 7) -> LogSegment {
        var segment = LogSegment(origin: origin, epoch: epoch)
        for sequence in sequences {
            segment.append(sequence: sequence, hlc: 1_000 + sequence, payload: (0..<sequence % 13).map { UInt8($0) })
        }
        return segment
    }

    /// `count` entries of one six-record segment each, sequences increasing.
    func entries(_ count: UInt64) -> [JournalEntry] {
        (1...count).map { (index: UInt64) -> JournalEntry in
            let first: UInt64 = index * 10
            return JournalEntry(segments: [segment(first...(first + 5))], clock: index)
        }
    }

    func encoded(_ entries: [JournalEntry], file: UInt64 = 1) -> [UInt8] {
        var bytes = [UInt8]()
        for entry in entries { entry.encode(into: &bytes, file: file) }
        return bytes
    }

    func readAll(_ bytes: [UInt8], file: UInt64 = 1) throws -> (entries: [JournalEntry], end: JournalEntry.Read) {
        try bytes.withUnsafeBytes { raw in
            var entries = [JournalEntry]()
            var offset = 0
            while true {
                let read = try JournalEntry.read(raw, at: offset, file: file)
                guard case .entry(let entry, let next) = read else { return (entries, read) }
                entries.append(entry)
                offset = next
            }
        }
    }

    @Test func entriesRoundTripWithSeveralSegments() throws {
        let written = [
            JournalEntry(segments: [segment(1...3), segment(1...2, origin: "node-b", epoch: 3)], clock: 9_000),
            JournalEntry(segments: [segment(4...40)], clock: 9_001),
            JournalEntry(segments: [], clock: 9_002),
        ]
        let (read, end) = try readAll(encoded(written))
        #expect(read == written)
        #expect(end == .end)
    }

    @Test func recordsOfAnotherFileNumberAndAMarkerEndTheFile() throws {
        let current = JournalEntry(segments: [segment(1...2)], clock: 1)
        var bytes = encoded([current], file: 5)
        bytes += encoded([JournalEntry(segments: [segment(7...9)], clock: 2)], file: 3)  // left by an earlier use
        #expect(try readAll(bytes, file: 5).entries == [current])
        #expect(try readAll(bytes, file: 5).end == .end)
        var closed = encoded([current], file: 5)
        JournalEntry.encodeRotationMarker(into: &closed, file: 5)
        #expect(try readAll(closed, file: 5).end == .rotated)
        // The file number is in the checksum: a record moved to another file does not read.
        #expect(try readAll(encoded([current], file: 5), file: 6).entries.isEmpty)
    }

    @Test func everyTruncationOfTheLastEntryReadsAsTorn() throws {
        let whole = [JournalEntry(segments: [segment(1...2)], clock: 1), JournalEntry(segments: [segment(3...5)], clock: 2)]
        let bytes = encoded(whole)
        let firstLength = encoded([whole[0]]).count
        for cut in firstLength + 1..<bytes.count {
            let (read, end) = try readAll(Array(bytes[..<cut]))
            #expect(read == [whole[0]], "cut at \(cut)")
            guard case .torn = end else { return #expect(Bool(false), "cut at \(cut) read \(end)") }
        }
    }

    @Test func aFlippedByteFailsTheChecksum() throws {
        var bytes = encoded([JournalEntry(segments: [segment(1...4)], clock: 1)])
        bytes[bytes.count - 3] ^= 0x40
        let (read, end) = try readAll(bytes)
        #expect(read.isEmpty)
        #expect(end == .torn(reason: "a checksum mismatch"))
    }

    /// Every entry recovery hands over, in order, and what it found.
    func recoverAll(_ directory: String, on fs: some FileSystem) throws -> ([JournalEntry], CommitJournal.Recovered) {
        var all = [JournalEntry]()
        let recovered = try CommitJournal.recover(in: directory, on: fs) { (_, entry) throws(StorageError) in all.append(entry) }
        return (all, recovered)
    }

    @Test func appendsRotateIndexAndRecoverInOrderOnBothDisks() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        for (fs, directory) in [(PosixFileSystem() as any FileSystem, temp.path), (SimulatedFileSystem(), "/data")] {
            let written = entries(20)
            let index = JournalIndex()
            var files = Set<UInt64>()
            do {
                let journal = try CommitJournal(fs: fs, directory: directory, number: 4, rotationBytes: 300, index: index)
                for entry in written {
                    try journal.append(entry)
                    files.insert(journal.fileNumber)
                }
                #expect(journal.filesStarted == UInt64(files.count))
            }
            #expect(files.count > 3)
            #expect(try CommitJournal.files(in: directory, on: fs) == files.sorted())
            // The index says what each file holds, and which are closed.
            let indexed = index.files
            #expect(indexed.map(\.number) == files.sorted())
            #expect(indexed.dropLast().allSatisfy(\.sealed) && !indexed.last!.sealed)
            #expect(indexed.first!.ranges[LogID(origin: NodeID(trusted: "node-a"), epoch: 7)]?.lowerBound == 10)
            let (recoveredEntries, recovered) = try recoverAll(directory, on: fs)
            #expect(recoveredEntries == written)
            #expect(recovered.entries == written.count)
            #expect(recovered.files.map(\.number) == files.sorted())
            #expect(recovered.files.map(\.ranges) == indexed.map(\.ranges), "recovery finds what the index held")
            #expect(recovered.tornTail == nil && recovered.unsealed?.number == files.max())
        }
    }

    /// The journal keeps its file written with zeros a step ahead of the records (so that a
    /// sync flushes data only), and recovery reads the zeros as the end, not as damage.
    @Test func zerosAheadOfTheRecordsReadAsTheEnd() throws {
        let fs = SimulatedFileSystem()
        let written = entries(3)
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: JournalIndex())
            for entry in written { try journal.append(entry) }
        }
        let bytes = try fs.readAll(CommitJournal.path(in: "/data", number: 1))
        #expect(bytes.count == CommitJournal.fillStep)
        #expect(bytes[encoded(written).count...].allSatisfy { $0 == 0 })
        let (found, recovered) = try recoverAll("/data", on: fs)
        #expect(found == written && recovered.tornTail == nil && recovered.unsealed?.offset == encoded(written).count)
    }

    @Test func aTornTailOfTheNewestFileIsDiscardedSealedAndAnUnclosedOlderFileIsRefused() throws {
        let fs = SimulatedFileSystem()
        let index = JournalIndex()
        let written = entries(3)
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: index)
            for entry in written { try journal.append(entry) }
        }
        // Half of a fourth entry, as a crash mid-write leaves it.
        var half = encoded([entries(4)[3]])
        half.removeLast(half.count / 2)
        // The records, without the zeros the journal writes ahead of them.
        let whole = Array(try fs.readAll(CommitJournal.path(in: "/data", number: 1)).prefix(encoded(written).count))
        try fs.replace(CommitJournal.path(in: "/data", number: 1), with: whole + half, inDirectory: "/data")
        let (found, recovered) = try recoverAll("/data", on: fs)
        #expect(found == written)
        #expect(recovered.tornTail != nil && recovered.unsealed?.offset == whole.count)
        // Sealing closes the file where its intact records end; then a later file may follow.
        try CommitJournal.seal(1, at: recovered.unsealed!.offset, in: "/data", on: fs)
        do {
            let next = try CommitJournal(fs: fs, directory: "/data", number: 2, index: index)
            try next.append(entries(5)[4])
        }
        let (again, afterSeal) = try recoverAll("/data", on: fs)
        #expect(again == written + [entries(5)[4]] && afterSeal.tornTail == nil)

        // An older file that ends without its marker while a later one holds entries: damage.
        try fs.replace(CommitJournal.path(in: "/data", number: 1), with: whole, inDirectory: "/data")
        #expect(throws: StorageError.self) { try recoverAll("/data", on: fs) }
    }

    /// In the newest file, a record that does not read back with intact records after it is
    /// damage, not a crash's torn tail (only the last entry can be torn): recovery refuses it
    /// rather than drop the acknowledged entries that follow. A record cut short at the end
    /// still reads as a torn tail, and so does a last record whose bytes were damaged.
    @Test func aDamagedRecordWithIntactOnesAfterItIsRefusedInTheNewestFile() throws {
        let written = entries(4)
        let lengths = written.map { encoded([$0]).count }
        for damaged in 0..<written.count {
            let fs = SimulatedFileSystem()
            do {
                let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: JournalIndex())
                for entry in written { try journal.append(entry) }
            }
            let path = CommitJournal.path(in: "/data", number: 1)
            var bytes = try fs.readAll(path)
            // A byte of the payload of entry `damaged`, past its header.
            let start = lengths[..<damaged].reduce(0, +)
            bytes[start + JournalEntry.headerBytes + 5] ^= 0x10
            try fs.replace(path, with: bytes, inDirectory: "/data")
            if damaged == written.count - 1 {
                let (found, recovered) = try recoverAll("/data", on: fs)
                #expect(found == Array(written.dropLast()) && recovered.unsealed?.offset == start && recovered.tornTail != nil)
            } else {
                do {
                    _ = try recoverAll("/data", on: fs)
                    Issue.record("damage to entry \(damaged) of \(written.count) was taken for a torn tail")
                } catch {
                    guard let storage = error as? StorageError, case .corrupt(let reason) = storage else {
                        return #expect(Bool(false), "expected .corrupt, got \(error)")
                    }
                    #expect(reason.contains("at byte \(start)") && reason.contains("intact record follows"))
                }
            }
        }
        // A marker after the damaged record counts as intact too.
        let fs = SimulatedFileSystem()
        var bytes = encoded(Array(written.prefix(2)))
        JournalEntry.encodeRotationMarker(into: &bytes, file: 1)
        bytes[lengths[0] + JournalEntry.headerBytes + 5] ^= 0x10
        try fs.replace(CommitJournal.path(in: "/data", number: 1), with: bytes, inDirectory: "/data")
        #expect(throws: StorageError.self) { try recoverAll("/data", on: fs) }
    }

    /// Damage the check of the next record alone missed, with an intact record further on: two
    /// records in a row damaged (a bad sector across both), and a header whose magic or file
    /// number was flipped, which read as the end of the records. Each was taken for the end of
    /// the newest file, and its acknowledged entries after it dropped and sealed over.
    @Test func damageWithAnIntactRecordFurtherOnIsRefusedInTheNewestFile() throws {
        let written = entries(5)
        let lengths = written.map { encoded([$0]).count }
        let starts = lengths.indices.map { lengths[..<$0].reduce(0, +) }
        let path = CommitJournal.path(in: "/data", number: 1)
        let damages: [(name: String, at: Int, damage: (inout [UInt8]) -> Void)] = [
            ("the payloads of entries 1 and 2", starts[1], { bytes in
                bytes[starts[1] + JournalEntry.headerBytes + 5] ^= 0x10
                bytes[starts[2] + JournalEntry.headerBytes + 5] ^= 0x10
            }),
            ("the magic of entry 2", starts[2], { bytes in bytes[starts[2]] ^= 0x01 }),
            ("the file number of entry 1", starts[1], { bytes in bytes[starts[1] + 8] ^= 0x02 }),
            ("the length of entry 1", starts[1], { bytes in bytes[starts[1] + 4] ^= 0x08 }),
        ]
        for (name, at, damage) in damages {
            let fs = SimulatedFileSystem()
            do {
                let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: JournalIndex())
                for entry in written { try journal.append(entry) }
            }
            var bytes = try fs.readAll(path)
            damage(&bytes)
            try fs.replace(path, with: bytes, inDirectory: "/data")
            do {
                _ = try recoverAll("/data", on: fs)
                Issue.record("damage to \(name) was taken for the end of the records")
            } catch {
                guard let storage = error as? StorageError, case .corrupt(let reason) = storage else {
                    Issue.record("expected .corrupt for \(name), got \(error)")
                    continue
                }
                #expect(reason.contains("at byte \(at)") && reason.contains("intact record follows"), "\(name): \(reason)")
            }
        }
    }

    @Test func aFlippedByteInAnOlderFileAndAMissingFileAreRefused() throws {
        let fs = SimulatedFileSystem()
        let index = JournalIndex()
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, rotationBytes: 300, index: index)
            for entry in entries(12) { try journal.append(entry) }
        }
        let files = try CommitJournal.files(in: "/data", on: fs)
        #expect(files.count >= 3)
        // A file missing between two others.
        let middle = CommitJournal.path(in: "/data", number: files[1])
        let saved = try fs.readAll(middle)
        try fs.remove(middle)
        #expect {
            _ = try recoverAll("/data", on: fs)
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.contains("is missing between")
        }
        try fs.replace(middle, with: saved, inDirectory: "/data")
        // A byte flipped in the first file.
        var first = try fs.readAll(CommitJournal.path(in: "/data", number: 1))
        first[30] ^= 0x40
        try fs.replace(CommitJournal.path(in: "/data", number: 1), with: first, inDirectory: "/data")
        #expect {
            _ = try recoverAll("/data", on: fs)
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.contains("is damaged at byte")
        }
    }

    /// A record's length damaged on disk is refused by a reader of the log before it sizes a read
    /// by it (a length near 4 GiB asked for as much memory).
    @Test func aReaderRefusesARecordLengthThatRunsPastTheDurableBytes() throws {
        let fs = SimulatedFileSystem()
        let index = JournalIndex()
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: index)
            for first in [UInt64(1), 7, 13] { try journal.append(JournalEntry(segments: [segment(first...(first + 5))], clock: first)) }
        }
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 7)
        #expect(try JournalReader(log: log, from: 1, in: "/data", on: fs, index: index).next(atMost: 100).count > 0)
        var bytes = try fs.readAll(CommitJournal.path(in: "/data", number: 1))
        // 1 MiB: under the largest record, past what the file holds.
        for (offset, byte) in zip(4..<8, [UInt8(0x00), 0x00, 0x10, 0x00]) { bytes[offset] = byte }
        try fs.replace(CommitJournal.path(in: "/data", number: 1), with: bytes, inDirectory: "/data")
        #expect {
            _ = try JournalReader(log: log, from: 1, in: "/data", on: fs, index: index).next(atMost: 100)
        } throws: { error in
            guard case JournalReadError.storage(.corrupt(let reason)) = error else { return false }
            return reason.contains("runs past")
        }
    }

    @Test func removingFilesDeletesTheOldestAndRecordsWhatWasTrimmed() throws {
        let fs = SimulatedFileSystem()
        let index = JournalIndex()
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, rotationBytes: 300, index: index)
            for entry in entries(12) { try journal.append(entry) }
        }
        let files = try CommitJournal.files(in: "/data", on: fs)
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 7)
        let lastOfSecond = try #require(index.file(files[1])?.ranges[log]?.upperBound)
        try CommitJournal.removeFiles(below: files[2], in: "/data", on: fs, index: index)
        #expect(try CommitJournal.files(in: "/data", on: fs) == Array(files.dropFirst(2)))
        #expect(index.files.map(\.number) == Array(files.dropFirst(2)))
        #expect(index.trimmedThrough(log) == lastOfSecond)
        fs.crash()
        #expect(try CommitJournal.files(in: "/data", on: fs) == Array(files.dropFirst(2)), "the deletions were made durable")
    }

    @Test func aMissingDirectoryIsATypedIOError() throws {
        #expect(throws: StorageError.self) {
            try CommitJournal(fs: PosixFileSystem(), directory: "/nonexistent/registry", number: 1, index: JournalIndex())
        }
    }
}
