import Foundation
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

    @Test func mergingJoinsRunsOfOneOriginAndKeepsTheNewestClock() {
        let merged = JournalEntry.merging([
            JournalEntry(segments: [segment(1...2)], clock: 10),
            JournalEntry(segments: [segment(3...4), segment(1...1, origin: "node-b")], clock: 12),
            JournalEntry(segments: [segment(2...2, origin: "node-b"), segment(5...5)], clock: 11),
        ])
        #expect(merged.clock == 12)
        #expect(merged.segments == [segment(1...4), segment(1...2, origin: "node-b"), segment(5...5)])
    }

    @Test func mergingCapsTheRecordsPerSegment() {
        let size = UInt64(JournalEntry.mergedSegmentRecords)
        let merged = JournalEntry.merging([
            JournalEntry(segments: [segment(1...(size - 1))], clock: 1), JournalEntry(segments: [segment(size...(size + 1))], clock: 2),
        ])
        #expect(merged.segments.map(\.count) == [Int(size) - 1, 2])
    }

    /// Every entry ``CommitJournal/recover(in:eachFile:)`` hands over, in order, and what it found.
    func recoverAll(_ directory: DataDirectory) throws -> ([JournalEntry], CommitJournal.Recovered) {
        var all = [JournalEntry]()
        let recovered = try CommitJournal.recover(in: directory) { (_, entries) throws(StorageError) in all += entries }
        return (all, recovered)
    }

    @Test func appendsRotateAndRecoverInOrder() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let written = entries(20)
        var files = Set<UInt64>()
        do {
            let journal = try CommitJournal(directory: directory, number: 4, rotationBytes: 300)
            var encodedBytes = 0
            for entry in written {
                try journal.append(entry)
                files.insert(journal.fileNumber)
                var encoded = [UInt8]()
                entry.encode(into: &encoded, file: journal.fileNumber)
                encodedBytes += encoded.count
            }
            // What it counts as written is every entry it wrote and every rotation marker.
            var marker = [UInt8]()
            JournalEntry.encodeRotationMarker(into: &marker, file: 4)
            #expect(journal.filesStarted == UInt64(files.count))
            #expect(journal.bytesWritten == UInt64(encodedBytes + (files.count - 1) * marker.count))
        }
        #expect(files.count > 3)
        #expect(try CommitJournal.files(in: directory) == files.sorted())
        var handed = [UInt64]()
        var recoveredEntries = [JournalEntry]()
        let recovered = try CommitJournal.recover(in: directory) { (file, entries) throws(StorageError) in
            handed.append(file)
            recoveredEntries += entries
        }
        #expect(recoveredEntries == written)
        #expect(recovered.entries == written.count)
        #expect(handed == files.sorted(), "each file's entries are handed over once, oldest file first")
        #expect(recovered.files.first == 4)
        #expect(recovered.tornTail == nil)

        try CommitJournal.retire(in: directory, below: recovered.files.last!, spares: SpareAdmission(keeping: 1))
        #expect(try CommitJournal.files(in: directory) == [recovered.files.last!])
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count == 1, "one spare is kept (made or retired), the rest deleted")
    }

    /// Retired files become spares up to the number kept (an older version's `spare.journal`
    /// counts), the rest are deleted, and each new file takes a spare while one is left.
    @Test func retiredFilesBecomeSparesUpToTheNumberKeptAndNewFilesTakeThem() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        #expect(FileManager.default.createFile(atPath: temp.path + "/spare.journal", contents: Data(count: 300)))
        // A maker that finds no room makes no spares: only retired files become spares here.
        func noMaker(_ first: UInt64) -> SpareJournalMaker {
            SpareJournalMaker(directoryPath: temp.path, bytes: 300, firstFile: first, minimumFreeBytes: Int.max)
        }
        do {
            let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: 300, spares: noMaker(1))
            for entry in entries(12) { try journal.append(entry) }
            #expect(journal.fileNumber > 5)
        }
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).isEmpty, "file 1 took the old spare")
        try CommitJournal.retire(in: directory, below: 5, spares: SpareAdmission(keeping: 3))
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path) == ["spare-1.journal", "spare-2.journal", "spare-3.journal"])
        #expect(try CommitJournal.files(in: directory).first == 5, "file 4 was deleted")
        let sizes = try (1...3).map { try FileManager.default.attributesOfItem(atPath: temp.path + "/spare-\($0).journal")[.size] as! Int }

        let last = try CommitJournal.files(in: directory).last!
        try CommitJournal.retire(in: directory, below: last + 1, spares: SpareAdmission(keeping: 3))
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count == 3, "already three: the rest are deleted")
        #expect(try CommitJournal.files(in: directory).isEmpty)
        do {
            let journal = try CommitJournal(directory: directory, number: last + 1, rotationBytes: 300, spares: noMaker(last + 1))
            #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count == 2)
            for entry in entries(3) { try journal.append(entry) }
            #expect(journal.fileNumber > last + 1)
        }
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count < 2, "each rotation took one")
        let reused = try FileManager.default.attributesOfItem(atPath: CommitJournal.path(in: directory, number: last + 1))[.size] as! Int
        #expect(sizes.contains(reused) && reused >= 300, "a spare written over keeps its blocks")
        let (_, recovered) = try recoverAll(directory)
        #expect(recovered.entries == 3 && recovered.tornTail == nil)
    }

    /// A retired file is reused as the next one: written over from its start, and its old
    /// records, numbered for the file it was, are not read back.
    @Test func aRetiredFileIsReusedAndItsOldRecordsAreIgnored() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        do {
            let journal = try CommitJournal(directory: directory, number: 1)
            for entry in entries(5) { try journal.append(entry) }
        }
        let oldSize = try FileManager.default.attributesOfItem(atPath: temp.path + "/journal-000000000001.log")[.size] as! Int
        try CommitJournal.retire(in: directory, below: 2, spares: SpareAdmission(keeping: 1))
        #expect(try CommitJournal.files(in: directory).isEmpty)

        let fresh = JournalEntry(segments: [segment(100...100)], clock: 100)
        do {
            let journal = try CommitJournal(directory: directory, number: 2)
            try journal.append(fresh)
            #expect(journal.fileNumber == 2)
        }
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).isEmpty)
        let size = try FileManager.default.attributesOfItem(atPath: temp.path + "/journal-000000000002.log")[.size] as! Int
        #expect(size == oldSize, "the spare was written over, not replaced")
        let (recoveredEntries, recovered) = try recoverAll(directory)
        #expect(recoveredEntries == [fresh])
        #expect(recovered.tornTail == nil)
    }

    @Test func aTornTailOfTheNewestFileIsDiscardedAndAnUnclosedOlderFileIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let written = entries(6)
        do {
            let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: 400)
            for entry in written { try journal.append(entry) }
        }
        let files = try CommitJournal.files(in: directory)
        #expect(files.count >= 2)
        let newest = CommitJournal.path(in: directory, number: files.last!)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: newest))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(encoded([JournalEntry(segments: [segment(90...99)], clock: 9)], file: files.last!).prefix(40)))
        try handle.close()

        let (recoveredEntries, recovered) = try recoverAll(directory)
        #expect(recoveredEntries == written)
        #expect(recovered.tornTail?.contains("journal-\(String(repeating: "0", count: 11))\(files.last!).log") == true)

        // Damage to the oldest file's rotation marker: what follows it can no longer be trusted
        // to be all there was, so recovery refuses rather than guess.
        let oldest = CommitJournal.path(in: directory, number: files.first!)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: oldest)))
        bytes[bytes.count - 1] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: oldest))
        #expect(throws: StorageError.self) { try recoverAll(directory) }
    }

    @Test func aMissingDirectoryIsATypedIOError() throws {
        let temp = try TemporaryDirectory()
        let directory = try DataDirectory(path: temp.path)
        temp.remove()
        #expect {
            _ = try CommitJournal(directory: directory, number: 1)
        } throws: { error in
            guard case .io(let path, let reason) = error as? StorageError else { return false }
            return path.hasSuffix("journal-000000000001.log") && reason.contains("create failed")
        }
    }

    @Test func aPayloadWrittenInPlaceMatchesACopiedOneAndAFailedWriteLeavesNoTrace() {
        struct Refused: Error {}
        var copied = LogSegment(origin: "node-a", epoch: 7)
        var inPlace = LogSegment(origin: "node-a", epoch: 7)
        for sequence in UInt64(1)...4 {
            let payload = (0..<sequence * 3).map { UInt8($0) }
            copied.append(sequence: sequence, hlc: 10 + sequence, payload: payload)
            inPlace.append(sequence: sequence, hlc: 10 + sequence) { (bytes: inout [UInt8]) in bytes += payload }
        }
        #expect(inPlace == copied)
        #expect(throws: Refused.self) {
            try inPlace.append(sequence: 5, hlc: 15) { (bytes: inout [UInt8]) throws(Refused) in
                bytes += [1, 2, 3]
                throw Refused()
            }
        }
        #expect(inPlace == copied)
    }
}
