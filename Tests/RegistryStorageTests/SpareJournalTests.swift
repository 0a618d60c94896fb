import Foundation
import Synchronization
import RegistryTestSupport
import Testing
@testable import RegistryStorage

/// ``SpareJournalMaker``: spares made during a run, written over by the next rotation.
@Suite struct SpareJournalTests {
    func entry(_ number: UInt64) -> JournalEntry {
        var segment = LogSegment(origin: "node-a", epoch: 1)
        segment.append(sequence: number, hlc: 1_000 + number, payload: [UInt8](repeating: UInt8(number % 251), count: 200))
        return JournalEntry(segments: [segment], clock: number)
    }

    func size(_ path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
    }

    /// The spares in the directory at `path`.
    func spares(_ path: String) -> [String] {
        CommitJournal.spareNames(inDirectoryAt: path)
    }

    /// Polls `condition` for up to ten seconds.
    func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<1_000 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    @Test func aSpareIsMadeOnceAFileIsAQuarterFullAndTheNextRotationWritesOverIt() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        // Not a whole number of the maker's chunks, so its last chunk is a short one. An entry
        // takes 276 bytes, so 150 stay under a quarter of the file and 250 pass it.
        let rotation = 200 << 10
        var written = [JournalEntry]()
        do {
            let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: rotation)
            // Under a quarter: no spare yet.
            for number in 1...150 as ClosedRange<UInt64> {
                written.append(entry(number))
                try journal.append(written.last!)
            }
            #expect(spares(temp.path).isEmpty)
            for number in 151...250 as ClosedRange<UInt64> {
                written.append(entry(number))
                try journal.append(written.last!)
            }
            #expect(try await eventually { !journal.isMakingSpare && spares(temp.path).count == 1 })
            let name = try #require(spares(temp.path).first)
            #expect(name.hasPrefix("spare-zeros-"))
            let spare = temp.path + "/" + name
            #expect(try size(spare) == rotation)
            #expect(try Data(contentsOf: URL(fileURLWithPath: spare)).allSatisfy { $0 == 0 })
            #expect(!FileManager.default.fileExists(atPath: temp.path + "/" + SpareJournalMaker.temporaryName))

            // Fill the file: the rotation renames the spare into place, whole, before writing.
            var number: UInt64 = 251
            while journal.fileNumber == 1 {
                written.append(entry(number))
                try journal.append(written.last!)
                number += 1
            }
            #expect(!FileManager.default.fileExists(atPath: spare))
            #expect(try size(CommitJournal.path(in: directory, number: 2)) == rotation, "file 2 is the spare, written over")
            #expect(spares(temp.path).isEmpty)
        }
        // The zeros after file 2's records read as its end, not as damage.
        var recovered = [JournalEntry]()
        let outcome = try CommitJournal.recover(in: directory) { (_, entries) throws(StorageError) in recovered += entries }
        #expect(recovered == written)
        #expect(outcome.tornTail == nil)
    }

    @Test func aHalfMadeSpareLeftByACrashIsRemoved() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let leftover = temp.path + "/" + SpareJournalMaker.temporaryName
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data([1, 2, 3])))
        _ = try CommitJournal(directory: directory, number: 1)
        #expect(!FileManager.default.fileExists(atPath: leftover))
    }

    @Test func anExistingSpareIsKept() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let spare = temp.path + "/spare.journal"
        #expect(FileManager.default.createFile(atPath: spare, contents: Data("retired".utf8)))
        let maker = SpareJournalMaker(directoryPath: temp.path, bytes: 1 << 20, firstFile: 1)
        maker.makeIfMissing(droppingFilesBelow: 1)
        #expect(try await eventually { !maker.isMaking })
        #expect(try Data(contentsOf: URL(fileURLWithPath: spare)) == Data("retired".utf8))
        #expect(spares(temp.path) == ["spare.journal"])
    }

    /// Topping up makes one spare a call, only up to the number kept, and a journal asking for
    /// its next spare makes none while one is left.
    @Test func toppingUpMakesOneSpareAtATimeUpToTheNumberKept() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        #expect(FileManager.default.createFile(atPath: temp.path + "/spare-7.journal", contents: Data("retired".utf8)))
        let maker = SpareJournalMaker(directoryPath: temp.path, bytes: 256 << 10, firstFile: 1, keeping: 3)
        #expect(maker.spareCount == 1)
        maker.makeIfMissing(droppingFilesBelow: 1)
        #expect(try await eventually { !maker.isMaking })
        #expect(maker.spareCount == 1, "one is left: nothing to make for the next rotation")
        maker.topUp()
        #expect(try await eventually { !maker.isMaking })
        #expect(maker.spareCount == 2, "one a call")
        for _ in 0..<3 {
            maker.topUp()
            #expect(try await eventually { !maker.isMaking })
        }
        #expect(maker.spareCount == 3)
        let made = spares(temp.path).filter { $0.hasPrefix("spare-zeros-") }
        #expect(made.count == 2)
        for name in made {
            #expect(try Data(contentsOf: URL(fileURLWithPath: temp.path + "/" + name)) == Data(count: 256 << 10))
        }
    }

    /// Files retired while the maker writes its zeros can fill the directory: the finished zeros
    /// are then not kept, so the directory never holds more spares than asked.
    @Test func zerosFinishedAfterRetiredFilesFilledTheDirectoryAreNotKept() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        // Held by the mutex only to hand it to the maker's thread.
        let directory = Mutex(try DataDirectory(path: temp.path))
        let admission = SpareAdmission(keeping: 2)
        let retired = Mutex<Result<Void, StorageError>?>(nil)
        let maker = SpareJournalMaker(
            directoryPath: temp.path, bytes: 64 << 10, firstFile: 3, admission: admission, minimumFreeBytes: nil,
            beforeAdding: {
                // Two finished files retired by the mover while the zeros were being written.
                for number: UInt64 in 1...2 {
                    _ = FileManager.default.createFile(atPath: CommitJournal.path(inDirectoryAt: temp.path, number: number), contents: Data(count: 300))
                }
                let result = directory.withLock { directory in
                    Result { () throws(StorageError) in try CommitJournal.retire(in: directory, below: 3, spares: admission) }
                }
                retired.withLock { $0 = result }
            })
        maker.topUp()
        #expect(try await eventually { !maker.isMaking && retired.withLock { $0 != nil } })
        #expect(retired.withLock { if case .success = $0 { true } else { false } })
        #expect(spares(temp.path) == ["spare-1.journal", "spare-2.journal"])
        #expect(try !FileManager.default.contentsOfDirectory(atPath: temp.path).contains(SpareJournalMaker.temporaryName), "nor a half-made file")
    }

    /// The admission renames a file into a spare only while the directory holds fewer than it
    /// keeps (or than a lower limit asked), and leaves the file otherwise.
    @Test func theAdmissionAddsSparesUpToTheNumberKept() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let admission = SpareAdmission(keeping: 2)
        func offer(_ name: String, limit: Int? = nil) -> SpareAdmission.Outcome {
            let path = temp.path + "/" + name
            _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
            return admission.add(renaming: path, to: temp.path + "/spare-" + name + ".journal", inDirectoryAt: temp.path, ifFewerThan: limit)
        }
        #expect(offer("a") == .added)
        #expect(offer("b", limit: 1) == .full, "one is enough for this caller")
        #expect(FileManager.default.fileExists(atPath: temp.path + "/b"), "a file not admitted stays")
        #expect(offer("c") == .added)
        #expect(offer("d", limit: 5) == .full, "never more than kept")
        #expect(spares(temp.path) == ["spare-a.journal", "spare-c.journal"])
        let outcome = admission.add(renaming: temp.path + "/missing", to: temp.path + "/spare-m.journal", inDirectoryAt: temp.path + "/none")
        #expect(outcome == .gone)
        #expect(SpareAdmission(keeping: 0).keeping == 1)
    }

    /// A maker keeps at least one spare, whatever it is asked.
    @Test func aMakerKeepsAtLeastOne() {
        #expect(SpareJournalMaker(directoryPath: "/nonexistent", firstFile: 1, keeping: 0).keeping == 1)
    }

    /// On a file system with less room than the maker needs, no spare is made: that space is
    /// the commits'.
    @Test func noSpareIsMadeWithoutRoomForIt() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let maker = SpareJournalMaker(directoryPath: temp.path, bytes: 1 << 20, firstFile: 1, minimumFreeBytes: Int.max)
        maker.makeIfMissing(droppingFilesBelow: 1)
        #expect(try await eventually { !maker.isMaking })
        #expect(try FileManager.default.contentsOfDirectory(atPath: temp.path).isEmpty)
    }

    /// Closing a journal stops a spare being made and leaves neither it nor its half-made file.
    @Test func cancellingStopsASpareBeingMadeAndLeavesNothing() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        // 8,192 chunks with a pause after each: far longer than this test takes to cancel.
        let maker = SpareJournalMaker(directoryPath: temp.path, bytes: 512 << 20, firstFile: 1)
        maker.makeIfMissing(droppingFilesBelow: 1)
        maker.cancelAndWait()
        #expect(!maker.isMaking)
        maker.makeIfMissing(droppingFilesBelow: 1)
        #expect(!maker.isMaking, "a cancelled maker makes no more")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temp.path).isEmpty)
    }

    @Test func aFileLeavesThePageCacheInPiecesThatCoverItExactly() {
        let piece = SpareJournalMaker.dropChunkBytes
        #expect(SpareJournalMaker.dropRanges(fileBytes: 0).isEmpty)
        #expect(SpareJournalMaker.dropRanges(fileBytes: 1) == [0..<1])
        #expect(SpareJournalMaker.dropRanges(fileBytes: piece) == [0..<piece])
        #expect(SpareJournalMaker.dropRanges(fileBytes: 2 * piece + 5) == [0..<piece, piece..<(2 * piece), (2 * piece)..<(2 * piece + 5)])
        let journalFile = SpareJournalMaker.dropRanges(fileBytes: 64 << 20)
        #expect(journalFile.count == 64 && journalFile.allSatisfy { $0.count == piece })
    }

    #if os(Linux)
    /// Pages of the file at `path` in the page cache, by `mincore` over a mapping of it.
    func residentPages(_ path: String) throws -> Int {
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        let bytes = try size(path)
        let mapping = try #require(mmap(nil, bytes, PROT_READ, MAP_SHARED, descriptor, 0))
        #expect(mapping != MAP_FAILED)
        defer { munmap(mapping, bytes) }
        let pageBytes = Int(sysconf(Int32(_SC_PAGESIZE)))
        var resident = [UInt8](repeating: 0, count: (bytes + pageBytes - 1) / pageBytes)
        #expect(mincore(mapping, bytes, &resident) == 0)
        return resident.filter { $0 & 1 == 1 }.count
    }

    /// Finished files leave the page cache when the next spare is made: nothing reads them while
    /// the node runs. The files are a piece and a part of a piece long, so the whole of each
    /// piece, the short last one too, must be dropped.
    @Test func finishedFilesLeaveThePageCacheWhenTheNextSpareIsMade() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        let rotation = SpareJournalMaker.dropChunkBytes + (300 << 10)
        let journal = try CommitJournal(directory: directory, number: 1, rotationBytes: rotation)
        var number: UInt64 = 1
        while journal.fileNumber == 1 {
            try journal.append(entry(number))
            number += 1
        }
        try await #require(eventually { !journal.isMakingSpare })
        let first = CommitJournal.path(in: directory, number: 1)
        #expect(try residentPages(first) > 0, "just written, file 1 is cached")
        // A quarter into file 2 (an entry takes more than 200 bytes): the maker drops file 1,
        // then makes the next spare.
        for _ in 0..<(rotation / 4 / 200) {
            try journal.append(entry(number))
            number += 1
        }
        #expect(try await eventually { !journal.isMakingSpare && spares(temp.path).count == 1 })
        #expect(try residentPages(first) == 0)
        #expect(try residentPages(CommitJournal.path(in: directory, number: 2)) > 0, "the current file stays cached")
    }
    #endif
}
