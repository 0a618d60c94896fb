import Platform
import RegistryCore
/// The operation log: numbered journal files of checksummed entries, one entry per group commit
/// (a commit past 256 MiB takes several, ``LogWriter``), each made durable with one write and one
/// sync. Files are `journal-<number>.log` in the data
/// directory, numbered upwards without gaps; once the current one passes ``rotationBytes`` it is
/// closed with a rotation marker and the next begins. Files are never rewritten; snapshots bound
/// how many are kept (see ``removeFiles(below:in:on:index:)``).
///
/// Every record carries its file number and a checksum. At start-up ``recover(in:on:eachEntry:)``
/// reads them back: only the newest file may end in a torn entry (a write a crash interrupted,
/// never acknowledged), which is discarded; every older file must end with its rotation marker,
/// or the journal was damaged and recovery refuses rather than guess what the damage hid.
///
/// A failed write, sync or rotation stops the journal for good: every later append and rotation
/// throws (``StorageError/stopped(_:)``), so that nothing is acknowledged from a file whose
/// contents are unknown (after a failed `fdatasync`, syncing again may report success for pages
/// the kernel dropped) or written past a rotation marker whose next file could not be started
/// (recovery reads a file up to its marker, and would never see it). A restart recovers from
/// what the disk holds.
///
/// Not thread-safe: one owner appends. The ``JournalIndex`` it updates is shared.
public final class CommitJournal {
    /// A file is closed and the next started once it holds this many bytes.
    public static let rotationBytes = 64 << 20

    private let fs: any FileSystem
    private let directory: String
    private let rotationBytes: Int
    private let index: JournalIndex
    private var file: FileHandle
    /// The number of the file being appended to.
    public private(set) var fileNumber: UInt64
    /// Where the next record goes in the current file.
    private var offset = 0
    /// How far the current file has been written, with zeros past ``offset``: see
    /// ``writeAndSync()``.
    private var filledBytes = 0
    private let firstFile: UInt64
    /// Bytes this journal has written, rotation markers included.
    public private(set) var bytesWritten: UInt64 = 0
    /// Files this journal has started, the current one included.
    public var filesStarted: UInt64 { fileNumber - firstFile + 1 }
    private var buffer: [UInt8] = []
    /// The segments of the entry last appended, which `buffer` still holds.
    private var lastSpans: [JournalEntryWriter.Span] = []
    /// The failure that stopped the journal, once one did (see the type's comment).
    private var failure: StorageError?

    /// Starts journal file `number` (above every existing one) in `directory`, and makes its
    /// name durable before anything is written to it.
    public init(
        fs: any FileSystem, directory: String, number: UInt64, rotationBytes: Int = CommitJournal.rotationBytes, index: JournalIndex
    ) throws(StorageError) {
        self.fs = fs
        self.directory = directory
        self.rotationBytes = rotationBytes
        self.index = index
        self.fileNumber = number
        self.firstFile = number
        self.file = try Self.start(number, in: directory, on: fs, index: index)
    }

    deinit {
        fs.close(file)
    }

    /// Writes `entry` and returns once it is durable. After a throw the file may end in a partial
    /// record, which recovery discards: the caller must not acknowledge the entry, and should stop
    /// appending.
    public func append(_ entry: JournalEntry) throws(StorageError) {
        try append(clock: entry.clock) { writer in
            for segment in entry.segments { writer.appendSegment(segment) }
        }
    }

    /// Writes the entry that `write` fills (its segments and records, encoded in place into the
    /// journal's own buffer) with the clock, and returns once it is durable, with how long its
    /// write and sync took in nanoseconds (the encoding not counted); as ``append(_:)`` after a
    /// throw.
    @discardableResult
    public func append(clock: UInt64, _ write: (inout JournalEntryWriter) -> Void) throws(StorageError) -> UInt64 {
        try checkNotStopped()
        if offset >= rotationBytes { try rotate() }
        if buffer.capacity > 4 << 20 { buffer = [] }  // a huge commit's buffer is not kept
        buffer.removeAll(keepingCapacity: true)
        lastSpans = []
        // The buffer is handed over, not shared, so that the writer appends to it without a copy.
        var taken = [UInt8]()
        swap(&taken, &buffer)
        var writer = JournalEntryWriter(appendingTo: consume taken, clock: clock)
        write(&writer)
        let spans: [JournalEntryWriter.Span]
        (buffer, spans) = writer.finish(file: fileNumber)
        let started = SystemClock.monotonicNanos()
        try writeAndSync()
        let took = SystemClock.monotonicNanos() - started
        index.committed(spans, in: fileNumber, durableBytes: offset)
        lastSpans = spans
        return took
    }

    /// The segments of the entry the last ``append(clock:_:)`` made durable.
    public var lastEntrySegmentCount: Int { lastSpans.count }

    /// The records of segment `segment` (in the order written) of the entry the last
    /// ``append(clock:_:)`` made durable, as the journal holds them: what peer links send of them,
    /// read from the bytes just written rather than encoded again. Their payloads are slices of
    /// one copy of the segment's records, which stays in memory while any of them does.
    public func lastEntryRecords(ofSegment segment: Int) -> [LogRecord] {
        let span = lastSpans[segment]
        do {
            // A copy, so that the buffer can be reused for the next entry.
            return try LogSegment.records(origin: span.origin, epoch: span.epoch, blob: Array(buffer[span.records]))
        } catch {
            preconditionFailure("a record this journal just wrote does not read back: \(error)")
        }
    }

    /// Closes the current file and starts the next now, so that what follows is in files of its
    /// own (after a snapshot from a peer, whose operations the journal does not hold).
    public func rotateNow() throws(StorageError) {
        try checkNotStopped()
        if offset > 0 { try rotate() }
    }

    /// True once a failure stopped the journal: every append and rotation throws from then on.
    public var isStopped: Bool { failure != nil }

    private func checkNotStopped() throws(StorageError) {
        if let failure { throw .stopped("journal file \(file.path) failed earlier and takes no more writes: \(failure)") }
    }

    /// Closes the full file with its marker (durably, before anything goes to the next one),
    /// then starts the next. Once the marker is written, a failure to start the next file stops
    /// the journal: what followed the marker in this file would never be read back.
    private func rotate() throws(StorageError) {
        buffer.removeAll(keepingCapacity: true)
        lastSpans = []
        JournalEntry.encodeRotationMarker(into: &buffer, file: fileNumber)
        try writeAndSync()
        index.committed([], in: fileNumber, durableBytes: offset, sealed: true)
        let next = fileNumber + 1
        let opened: FileHandle
        do {
            opened = try Self.start(next, in: directory, on: fs, index: index)
        } catch {
            failure = error
            throw error
        }
        fs.close(file)
        file = opened
        fileNumber = next
        offset = 0
        filledBytes = 0
    }

    /// Zeros written ahead of the records, a step at a time.
    public static let fillStep = 1 << 20
    private static let zeros = [UInt8](repeating: 0, count: fillStep)

    /// Writes `buffer` at `offset` and syncs. The file is kept written with zeros up to a step
    /// ahead of its records: overwriting written blocks, `fdatasync` has only data to flush,
    /// while an append must also commit the file's new size to the file system's journal
    /// (BENCHMARKS.md, "Journal writes" and "Journal fill steps"). Zeros read as the end of the records
    /// (``JournalEntry/Read/end``), so recovery needs no rule of its own for them.
    /// A failure stops the journal (see the type's comment).
    private func writeAndSync() throws(StorageError) {
        // Small files (tests) fill in steps of their own size.
        let step = min(Self.fillStep, rotationBytes)
        do {
            while offset + buffer.count > filledBytes {
                try Self.zeros.withUnsafeBytes { raw in
                    Result { () throws(StorageError) in try fs.write(file, UnsafeRawBufferPointer(rebasing: raw[..<step]), at: filledBytes) }
                }.get()
                filledBytes += step
            }
            try fs.write(file, buffer, at: offset)
            try fs.sync(file)
        } catch {
            failure = error
            throw error
        }
        offset += buffer.count
        bytesWritten += UInt64(buffer.count)
    }

    private static func start(_ number: UInt64, in directory: String, on fs: any FileSystem, index: JournalIndex) throws(StorageError) -> FileHandle {
        let path = path(in: directory, number: number)
        let file = try fs.open(path, create: true)
        do {
            try fs.syncDirectory(directory)
        } catch {
            fs.close(file)
            throw error
        }
        index.started(number)
        return file
    }

    // MARK: - Files

    /// The journal files of `directory`, by number.
    public static func files(in directory: String, on fs: some FileSystem) throws(StorageError) -> [UInt64] {
        try fs.list(directory).compactMap { name -> UInt64? in
            guard name.hasPrefix("journal-"), name.hasSuffix(".log") else { return nil }
            return UInt64(name.dropFirst("journal-".count).dropLast(".log".count))
        }.sorted()
    }

    public static func path(in directory: String, number: UInt64) -> String {
        let digits = String(number)
        return directory + "/journal-" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits + ".log"
    }

    /// Deletes the journal files numbered below `number` (every one of them covered by a
    /// snapshot, and past every retention floor: the caller decided), oldest first, then makes
    /// the deletions durable.
    public static func removeFiles(below number: UInt64, in directory: String, on fs: some FileSystem, index: JournalIndex) throws(StorageError) {
        let doomed = try files(in: directory, on: fs).filter { $0 < number }
        guard !doomed.isEmpty else { return }
        index.removed(below: number)
        for old in doomed { try fs.remove(path(in: directory, number: old)) }
        try fs.syncDirectory(directory)
    }

    // MARK: - Recovery

    /// What reading the journal found.
    public struct Recovered: Sendable {
        /// Every file, with what it holds, oldest first.
        public var files: [JournalIndex.File] = []
        /// Intact entries, over every file.
        public var entries = 0
        /// Where and why the newest file's last record was cut short, when it was: a write the
        /// crash interrupted, never acknowledged, and discarded.
        public var tornTail: String?
        /// The newest file, when it does not end with its rotation marker: where its intact
        /// records end, so that ``seal(_:at:in:on:)`` can close it before a new file begins.
        public var unsealed: (number: UInt64, offset: Int)?
    }

    /// Reads every journal file of `directory`, oldest first, and hands `body` each intact
    /// entry in order, one file in memory at a time. Throws ``StorageError/corrupt(_:)`` when a
    /// file is missing between two others, or a file before the newest does not end with its
    /// rotation marker (damage, not a crash).
    public static func recover(
        in directory: String, on fs: some FileSystem, eachEntry body: (_ file: UInt64, _ entry: JournalEntry) throws(StorageError) -> Void
    ) throws(StorageError) -> Recovered {
        var recovered = Recovered()
        let numbers = try files(in: directory, on: fs)
        for (earlier, later) in zip(numbers, numbers.dropFirst()) where later != earlier + 1 {
            throw .corrupt(
                "journal file \(path(in: directory, number: earlier + 1)) is missing between \(earlier) and \(later): operations it held are lost")
        }
        var buffer = [UInt8]()
        for (position, number) in numbers.enumerated() {
            let path = path(in: directory, number: number)
            let size = try fs.readAll(path, reusing: &buffer)
            var summary = JournalIndex.File(number: number)
            let read = buffer.withUnsafeBytes { raw in
                Result { () throws(StorageError) in
                    try forEachEntry(UnsafeRawBufferPointer(rebasing: raw[0..<size]), file: number) { (entry) throws(StorageError) in
                        try body(number, entry)
                        for segment in entry.segments where segment.count > 0 {
                            let key = segment.log
                            summary.ranges[key] = (summary.ranges[key]?.lowerBound ?? segment.firstSequence)...segment.lastSequence
                        }
                        recovered.entries += 1
                    }
                }
            }
            let ending = try read.get()
            let isNewest = position == numbers.count - 1
            switch ending {
            case .rotated(let end):
                summary.sealed = true
                summary.durableBytes = end
            case .damaged(let reason, let offset, let next):
                throw .corrupt(
                    "journal file \(path) is damaged at byte \(offset) (\(reason)), and an intact record follows it at byte \(next): acknowledged entries would be lost"
                )
            case .torn(let reason, let offset):
                guard isNewest else {
                    throw .corrupt("journal file \(path) is damaged at byte \(offset) (\(reason)), and later files hold entries")
                }
                recovered.tornTail = "\(path) at byte \(offset): \(reason)"
                recovered.unsealed = (number, offset)
                summary.durableBytes = offset
            case .end(let offset):
                guard isNewest else {
                    throw .corrupt("journal file \(path) ends at byte \(offset) without its rotation marker, and later files hold entries")
                }
                recovered.unsealed = (number, offset)
                summary.durableBytes = offset
            }
            recovered.files.append(summary)
        }
        return recovered
    }

    /// Closes journal file `number` with its rotation marker at `offset`, where its intact records
    /// end (over any torn bytes after them), durably: files before the newest always end so.
    public static func seal(_ number: UInt64, at offset: Int, in directory: String, on fs: some FileSystem) throws(StorageError) {
        var marker = [UInt8]()
        JournalEntry.encodeRotationMarker(into: &marker, file: number)
        let file = try fs.open(path(in: directory, number: number), create: false)
        defer { fs.close(file) }
        try fs.write(file, marker, at: offset)
        try fs.sync(file)
    }

    /// How one file's records end.
    enum Ending: Equatable {
        /// With its rotation marker, which ends at `end`.
        case rotated(end: Int)
        case torn(reason: String, offset: Int)
        /// A record that does not read back, or no record where the records seem to end, with
        /// an intact record of the file somewhere after it. A crash cannot leave that: every
        /// entry is written and synced before the next is written, into zeros, so only the last
        /// can be torn, and nothing of the file follows it. The bytes were damaged after they
        /// were written (a flipped bit in a header, a bad sector across two records), and what
        /// follows was acknowledged.
        case damaged(reason: String, offset: Int, next: Int)
        case end(offset: Int)
    }

    /// Hands each intact entry of one file's bytes to `body`, in order, and says how the file's
    /// entries end.
    static func forEachEntry(
        _ raw: UnsafeRawBufferPointer, file: UInt64, _ body: (JournalEntry) throws(StorageError) -> Void
    ) throws(StorageError) -> Ending {
        var offset = 0
        while true {
            switch try JournalEntry.read(raw, at: offset, file: file) {
            case .entry(let entry, let next):
                try body(entry)
                offset = next
            case .rotated:
                return .rotated(end: offset + JournalEntry.headerBytes)
            case .torn(let reason):
                if let next = try intactRecord(in: raw, after: offset, file: file) {
                    return .damaged(reason: reason, offset: offset, next: next)
                }
                return .torn(reason: reason, offset: offset)
            case .end:
                if let next = try intactRecord(in: raw, after: offset, file: file) {
                    return .damaged(reason: "no record of the file starts here", offset: offset, next: next)
                }
                return .end(offset: offset)
            }
        }
    }

    /// Where the first intact record of `file` (an entry or the rotation marker) starts after
    /// `offset`: where the header at `offset` says its record ends, else the first at any byte
    /// (records are not aligned). A look at every byte of what is left of the file, once per
    /// start-up: mostly the zeros written ahead of the records, a megabyte or so.
    static func intactRecord(in raw: UnsafeRawBufferPointer, after offset: Int, file: UInt64) throws(StorageError) -> Int? {
        func intact(at candidate: Int) throws(StorageError) -> Bool {
            switch try JournalEntry.read(raw, at: candidate, file: file) {
            case .entry, .rotated: return true
            case .torn, .end: return false
            }
        }
        if let declared = JournalEntry.declaredEnd(raw, at: offset), declared > offset, declared < raw.count, try intact(at: declared) {
            return declared
        }
        var candidate = offset + 1
        while candidate + JournalEntry.headerBytes <= raw.count {
            let magic = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: candidate, as: UInt32.self))
            if magic == JournalEntry.entryMagic || magic == JournalEntry.rotationMagic, try intact(at: candidate) { return candidate }
            candidate += 1
        }
        return nil
    }
}
