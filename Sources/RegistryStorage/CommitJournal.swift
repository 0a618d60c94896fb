#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The append-only files that make a group commit durable: one `write` and one `fdatasync` per
/// commit, where an SQLite transaction wrote a page at a time and stalled whenever its WAL was
/// checkpointed. ``JournaledLog`` later moves the entries into the ``OperationLog`` and deletes
/// the files they came from; at start-up, ``recover(in:)`` reads whatever is left.
///
/// Files are `journal-<number>.log` in the data directory, numbered upwards; a new one is started
/// once the current one passes ``rotationBytes``.
///
/// Not thread-safe: the owner confines appends to one thread. ``remove(in:below:)`` touches only
/// files below the one being appended to, so it may run elsewhere.
public final class CommitJournal {
    /// A file is closed and the next started once it holds this many bytes.
    public static let rotationBytes = 64 << 20

    private let directory: DataDirectory
    private let rotationBytes: Int
    private var descriptor: Int32
    /// The number of the file being appended to.
    public private(set) var fileNumber: UInt64
    private var fileBytes = 0
    private var buffer: [UInt8] = []

    /// Starts a new, empty journal file numbered `number` (above every existing one).
    public init(directory: DataDirectory, number: UInt64, rotationBytes: Int = CommitJournal.rotationBytes) throws(StorageError) {
        self.directory = directory
        self.rotationBytes = rotationBytes
        self.fileNumber = number
        self.descriptor = try Self.create(Self.path(in: directory, number: number), directory: directory)
    }

    deinit {
        close(descriptor)
    }

    /// Writes `entry` and returns once it is on disk, with the number of the file holding it.
    /// After a throw the file may end in a partial entry, which recovery discards: the caller
    /// must not acknowledge the entry, and should stop appending.
    public func append(_ entry: JournalEntry) throws(StorageError) -> UInt64 {
        if fileBytes >= rotationBytes { try rotate() }
        buffer.removeAll(keepingCapacity: true)
        entry.encode(into: &buffer)
        let path = Self.path(in: directory, number: fileNumber)
        try buffer.withUnsafeBytes { Self.writeAll($0, to: descriptor, path: path) }.get()
        guard fdatasync(descriptor) == 0 else { throw Self.ioError(path, "fdatasync") }
        fileBytes += buffer.count
        if buffer.capacity > 4 << 20 { buffer = [] }
        return fileNumber
    }

    private func rotate() throws(StorageError) {
        let next = fileNumber + 1
        let opened = try Self.create(Self.path(in: directory, number: next), directory: directory)
        close(descriptor)
        descriptor = opened
        fileNumber = next
        fileBytes = 0
    }

    // MARK: - Files

    /// The journal files of `directory`, by number.
    public static func files(in directory: DataDirectory) throws(StorageError) -> [UInt64] {
        guard let handle = opendir(directory.path) else { throw ioError(directory.path, "opendir") }
        defer { closedir(handle) }
        var numbers = [UInt64]()
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name.hasPrefix("journal-"), name.hasSuffix(".log"),
                let number = UInt64(name.dropFirst("journal-".count).dropLast(".log".count))
            {
                numbers.append(number)
            }
        }
        return numbers.sorted()
    }

    /// Deletes the journal files numbered below `number`.
    public static func remove(in directory: DataDirectory, below number: UInt64) throws(StorageError) {
        for old in try files(in: directory) where old < number {
            let path = path(in: directory, number: old)
            guard unlink(path) == 0 || errno == ENOENT else { throw ioError(path, "unlink") }
        }
    }

    static func path(in directory: DataDirectory, number: UInt64) -> String {
        let digits = String(number)
        return directory.path + "/journal-" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits + ".log"
    }

    // MARK: - Recovery

    /// What the journal files left by the previous run held.
    public struct Recovered: Sendable {
        /// Every intact entry, oldest first.
        public var entries: [JournalEntry] = []
        /// The files read, by number.
        public var files: [UInt64] = []
        /// Why the last file's tail was discarded, and how many bytes it had; nil when it ended
        /// cleanly. A tail is an entry whose write the crash interrupted, never acknowledged.
        public var discardedTail: (reason: String, bytes: Int)?
    }

    /// Reads every journal file in `directory`. Only the newest file may end in an incomplete
    /// entry; damage anywhere else throws ``StorageError/corrupt(_:)``.
    public static func recover(in directory: DataDirectory) throws(StorageError) -> Recovered {
        var recovered = Recovered()
        recovered.files = try files(in: directory)
        for number in recovered.files {
            let path = path(in: directory, number: number)
            let bytes = try readFile(path)
            let read = bytes.withUnsafeBytes { raw in
                Result { () throws(StorageError) in try readEntries(raw, path: path, isNewest: number == recovered.files.last) }
            }
            let (entries, tail) = try read.get()
            recovered.entries += entries
            recovered.discardedTail = tail
        }
        return recovered
    }

    /// The entries of one file's bytes, and the discarded tail when the file is the newest.
    private static func readEntries(_ raw: UnsafeRawBufferPointer, path: String, isNewest: Bool) throws(StorageError) -> (
        [JournalEntry], (reason: String, bytes: Int)?
    ) {
        var entries = [JournalEntry]()
        var offset = 0
        while true {
            switch try JournalEntry.read(raw, at: offset) {
            case .end:
                return (entries, nil)
            case .entry(let entry, let next):
                entries.append(entry)
                offset = next
            case .incomplete(let reason):
                guard isNewest else {
                    throw .corrupt("journal file \(path) is damaged at byte \(offset) (\(reason)) and is not the newest")
                }
                return (entries, (reason, raw.count - offset))
            }
        }
    }

    // MARK: - System calls

    private static func create(_ path: String, directory: DataDirectory) throws(StorageError) -> Int32 {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ioError(path, "create") }
        // The new name must survive a crash as surely as the entries written under it.
        let directoryDescriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else {
            close(descriptor)
            throw ioError(directory.path, "open")
        }
        defer { close(directoryDescriptor) }
        guard fsync(directoryDescriptor) == 0 else {
            close(descriptor)
            throw ioError(directory.path, "fsync")
        }
        return descriptor
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, path: String) -> Result<Void, StorageError> {
        var offset = 0
        while offset < bytes.count {
            let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return .failure(ioError(path, "write"))
            }
            offset += written
        }
        return .success(())
    }

    private static func readFile(_ path: String) throws(StorageError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ioError(path, "open") }
        defer { close(descriptor) }
        var bytes = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ioError(path, "read")
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    private static func ioError(_ path: String, _ call: String) -> StorageError {
        .io(path: path, reason: "\(call) failed: \(String(cString: strerror(errno)))")
    }
}
