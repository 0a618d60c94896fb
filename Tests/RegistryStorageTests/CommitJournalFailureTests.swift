import RegistryCore
import Synchronization
import Testing
@testable import RegistryStorage

/// The simulated disk, failing the next call of one kind once, then working again: a failure that
/// passes (a descriptor limit, a full disk that is freed), after which a journal that went on
/// would write where recovery never reads.
final class FailingOnceFileSystem: FileSystem {
    enum Call: Sendable { case open, sync, syncDirectory }
    let inner: SimulatedFileSystem
    private let armed = Mutex<Call?>(nil)

    init(_ inner: SimulatedFileSystem) { self.inner = inner }

    /// The next call of kind `call` fails.
    func failNext(_ call: Call) { armed.withLock { $0 = call } }

    private func check(_ call: Call, _ path: String) throws(StorageError) {
        let fails = armed.withLock { armed -> Bool in
            guard armed == call else { return false }
            armed = nil
            return true
        }
        if fails { throw StorageError.io(path: path, reason: "injected failure of \(call)") }
    }

    func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle {
        try check(.open, path)
        return try inner.open(path, create: create)
    }
    func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle {
        try check(.open, path)
        return try inner.openBypassingCache(path)
    }
    func isBypassingCache(_ file: FileHandle) -> Bool { inner.isBypassingCache(file) }
    func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
        try inner.write(file, bytes, at: offset)
    }
    func read(_ file: FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        try inner.read(file, at: offset, count: count)
    }
    func read(_ file: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int {
        try inner.read(file, at: offset, into: buffer)
    }
    func size(_ file: FileHandle) throws(StorageError) -> Int { try inner.size(file) }
    func sync(_ file: FileHandle) throws(StorageError) {
        try check(.sync, file.path)
        try inner.sync(file)
    }
    func close(_ file: FileHandle) { inner.close(file) }
    func rename(_ source: String, to destination: String) throws(StorageError) { try inner.rename(source, to: destination) }
    func remove(_ path: String) throws(StorageError) { try inner.remove(path) }
    func list(_ directory: String) throws(StorageError) -> [String] { try inner.list(directory) }
    func syncDirectory(_ directory: String) throws(StorageError) {
        try check(.syncDirectory, directory)
        try inner.syncDirectory(directory)
    }

    func availableBytes(in directory: String) throws(StorageError) -> UInt64 { try inner.availableBytes(in: directory) }
}

/// A journal that failed stops: every later append and rotation throws, so that nothing is
/// acknowledged that recovery would not read back. The oracle is recovery after a simulated
/// power cut: it must find exactly the entries whose appends returned.
@Suite struct CommitJournalFailureTests {
    /// `count` entries of one three-record segment each, sequences increasing from `first`.
    func entries(_ count: Int, from first: UInt64 = 1) -> [JournalEntry] {
        (0..<UInt64(count)).map { index -> JournalEntry in
            var segment = LogSegment(origin: "node-a", epoch: 3)
            for offset in 0..<UInt64(3) {
                let sequence = first + index * 3 + offset
                segment.append(sequence: sequence, hlc: 5_000 + sequence, payload: [UInt8](repeating: UInt8(sequence % 251), count: 20))
            }
            return JournalEntry(segments: [segment], clock: first + index)
        }
    }

    /// Appends each entry, keeping those whose append returned; then the power goes and recovery
    /// reads the disk.
    func acknowledgedAndRecovered(
        _ fs: FailingOnceFileSystem, _ journal: CommitJournal, appending more: [JournalEntry], acknowledged: inout [JournalEntry]
    ) throws -> [JournalEntry] {
        for entry in more {
            do {
                try journal.append(entry)
                acknowledged.append(entry)
            } catch {
                #expect(journal.isStopped, "an append that throws leaves the journal stopped")
            }
        }
        fs.inner.crash()
        var recovered = [JournalEntry]()
        _ = try CommitJournal.recover(in: "/data", on: fs.inner) { (_, entry) throws(StorageError) in recovered.append(entry) }
        return recovered
    }

    /// The next file could not be started after the marker was written: the journal, left on the
    /// old file past its marker, went on appending there, and recovery, which reads a file up to
    /// its marker, lost every one of those acknowledged entries.
    @Test(arguments: [FailingOnceFileSystem.Call.open, .syncDirectory])
    func aRotationThatCannotStartTheNextFileStopsTheJournal(failing call: FailingOnceFileSystem.Call) throws {
        let fs = FailingOnceFileSystem(SimulatedFileSystem())
        let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: JournalIndex())
        var acknowledged = [JournalEntry]()
        for entry in entries(4) {
            try journal.append(entry)
            acknowledged.append(entry)
        }
        fs.failNext(call)
        #expect(throws: StorageError.self) { try journal.rotateNow() }
        #expect(journal.isStopped)
        // The failure has passed; the journal still takes nothing.
        do {
            try journal.append(entries(1, from: 100)[0])
            Issue.record("an append after a failed rotation returned")
        } catch {
            guard case .stopped = error else { return #expect(Bool(false), "expected .stopped, got \(error)") }
        }
        #expect(throws: StorageError.self) { try journal.rotateNow() }
        let recovered = try acknowledgedAndRecovered(fs, journal, appending: entries(3, from: 200), acknowledged: &acknowledged)
        #expect(recovered == acknowledged)
        #expect(acknowledged.count == 4)
    }

    /// The same through an append's own rotation, with a small file: the append that needed the
    /// new file throws, and so does every one after it.
    @Test func anAppendWhoseRotationFailsStopsTheJournal() throws {
        let fs = FailingOnceFileSystem(SimulatedFileSystem())
        let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, rotationBytes: 300, index: JournalIndex())
        var acknowledged = [JournalEntry]()
        for entry in entries(6) {
            try journal.append(entry)
            acknowledged.append(entry)
        }
        try #require(journal.fileNumber >= 2, "the files rotate every few entries")
        fs.failNext(.open)
        let recovered = try acknowledgedAndRecovered(fs, journal, appending: entries(8, from: 200), acknowledged: &acknowledged)
        #expect(journal.isStopped)
        #expect(recovered == acknowledged)
        #expect(acknowledged.count < 14, "the append whose rotation failed, and every one after it, was not acknowledged")
    }

    /// After a failed sync what the file holds is unknown, and a later sync may report success
    /// for pages the kernel dropped: the journal does not try again.
    @Test func aFailedSyncStopsTheJournal() throws {
        let fs = FailingOnceFileSystem(SimulatedFileSystem())
        let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: JournalIndex())
        var acknowledged = [JournalEntry]()
        for entry in entries(3) {
            try journal.append(entry)
            acknowledged.append(entry)
        }
        fs.failNext(.sync)
        let recovered = try acknowledgedAndRecovered(fs, journal, appending: entries(4, from: 100), acknowledged: &acknowledged)
        #expect(journal.isStopped)
        #expect(acknowledged.count == 3)
        #expect(recovered == acknowledged)
    }
}
