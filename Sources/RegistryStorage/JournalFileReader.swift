import Platform

/// Reads one journal file into memory a piece at a time, so that a serving node can spread the
/// reading of a finished file over many short steps, and drop what it has used: read back to
/// back, with the kernel's readahead, a 64 MiB file kept the disk busy for 100-400 ms here, and
/// the commits' `fdatasync`s waited behind it (49 of 79 syncs over 3 ms, of a probe syncing once
/// a millisecond, fell in those reads).
///
/// Not thread-safe: one owner reads it.
public final class JournalFileReader {
    /// The file read.
    public let path: String
    private let descriptor: Int32
    /// What has been read and not discarded.
    public private(set) var bytes: [UInt8] = []
    /// Bytes read and discarded before ``bytes``: the file offset of its first byte.
    public private(set) var discarded = 0
    /// True once the end of the file has been read.
    public private(set) var isAtEnd = false

    /// Opens the file at `path`. With `readahead` false the kernel reads exactly what each
    /// ``read(upTo:)`` asks for and no more.
    public init(path: String, readahead: Bool = true) throws(StorageError) {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .io(path: path, reason: "open failed: \(String(cString: strerror(errno)))") }
        #if os(Linux)
        if !readahead { _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_RANDOM) }
        #endif
    }

    deinit {
        close(descriptor)
    }

    /// Reads up to `limit` more bytes; returns ``isAtEnd``.
    @discardableResult
    public func read(upTo limit: Int) throws(StorageError) -> Bool {
        guard !isAtEnd else { return true }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: limit))
        var done = 0
        while done < limit {
            let count = bytes.withUnsafeMutableBytes { readFile(descriptor, $0.baseAddress! + start + done, limit - done) }
            if count < 0 {
                if errno == EINTR { continue }
                bytes.removeLast(limit - done)
                throw .io(path: path, reason: "read failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 {
                isAtEnd = true
                break
            }
            done += count
        }
        bytes.removeLast(limit - done)
        return isAtEnd
    }

    /// Forgets the first `count` bytes of ``bytes``, which the owner has used.
    public func discard(_ count: Int) {
        bytes.removeFirst(count)
        discarded += count
    }

    /// Reads the rest of the file, a megabyte at a time, and returns what was not discarded.
    public func readAll() throws(StorageError) -> [UInt8] {
        while try !read(upTo: 1 << 20) {}
        return bytes
    }
}

/// The `read` system call, named apart from ``JournalFileReader/read(upTo:)``.
private func readFile(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
