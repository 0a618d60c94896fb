/// The calls through which storage reaches a disk: open, write at an offset, sync, rename, list,
/// read and remove. ``PosixFileSystem`` makes them on the real one; ``SimulatedFileSystem`` keeps
/// files in memory and, at a simulated crash, loses every write that was not synced, so that
/// tests (and later whole simulated nodes) can crash storage at any point, deterministically.
///
/// The durability contract is POSIX's, as storage code must assume it: data written to a file is
/// durable once ``sync(_:)`` of that file returns; a file created, renamed or removed is durable in
/// its directory once ``syncDirectory(_:)`` returns. Paths are absolute or relative to the
/// process's working directory; directories are not created here.
public protocol FileSystem: Sendable {
    /// Opens the file at `path` for reading and writing, creating it (empty) when `create` is
    /// true and it does not exist.
    func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle
    /// Opens the file at `path` for writing, creating it, for one long write front to back of a
    /// file that is not read back soon (a snapshot): where the file system allows it, a write
    /// whose buffer, offset and length are aligned to ``UncachedFiles/alignment`` skips the page
    /// cache. A write of any other alignment, or one the file system refuses past the cache,
    /// works as on any handle, through the cache, and so do the handle's writes after it
    /// (``isBypassingCache(_:)`` says which). The durability contract is unchanged. Read the file
    /// through another handle: while this one bypasses the cache, its reads must be aligned too.
    func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle
    /// True while `file`'s aligned writes skip the page cache (``openBypassingCache(_:)``).
    func isBypassingCache(_ file: FileHandle) -> Bool
    /// Writes all of `bytes` at `offset`, growing the file when needed.
    func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError)
    /// Reads up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(_ file: FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8]
    /// Reads up to `buffer.count` bytes at `offset` into `buffer` and returns how many; fewer
    /// only at the end of the file.
    func read(_ file: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int
    /// The file's size in bytes.
    func size(_ file: FileHandle) throws(StorageError) -> Int
    /// Makes what was written to the file durable.
    func sync(_ file: FileHandle) throws(StorageError)
    func close(_ file: FileHandle)
    /// Replaces `destination` with `source` atomically (durable after ``syncDirectory(_:)``).
    func rename(_ source: String, to destination: String) throws(StorageError)
    /// Removes the file (durable after ``syncDirectory(_:)``); a missing file is no error.
    func remove(_ path: String) throws(StorageError)
    /// The names of the entries of the directory, in no particular order.
    func list(_ directory: String) throws(StorageError) -> [String]
    /// Makes the directory's entries (files created, renamed, removed) durable.
    func syncDirectory(_ directory: String) throws(StorageError)
    /// The bytes that files may still grow by on the file system that holds `directory`, as an
    /// unprivileged writer sees it (blocks reserved for root excluded).
    func availableBytes(in directory: String) throws(StorageError) -> UInt64
}

/// An open file of a ``FileSystem``: a number that only that file system interprets.
public struct FileHandle: Hashable, Sendable {
    public let path: String
    let number: Int32
    /// True when it was opened to bypass the page cache (``FileSystem/openBypassingCache(_:)``);
    /// ``FileSystem/isBypassingCache(_:)`` says whether it still does.
    public let openedBypassingCache: Bool

    init(path: String, number: Int32, openedBypassingCache: Bool = false) {
        self.path = path
        self.number = number
        self.openedBypassingCache = openedBypassingCache
    }
}

extension FileSystem {
    /// Writes all of `bytes` at `offset`.
    public func write(_ file: FileHandle, _ bytes: [UInt8], at offset: Int) throws(StorageError) {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(StorageError) in try write(file, raw, at: offset) }
        }.get()
    }

    /// Reads the whole file at `path`.
    public func readAll(_ path: String) throws(StorageError) -> [UInt8] {
        let file = try open(path, create: false)
        defer { close(file) }
        return try read(file, at: 0, count: try size(file))
    }

    /// Reads the whole file at `path` into the start of `buffer`, growing it when the file is
    /// bigger, and returns the file's size: a replay reads many big files in turn, and memory the
    /// process already has costs none of the page faults and zeroing that new memory does.
    public func readAll(_ path: String, reusing buffer: inout [UInt8]) throws(StorageError) -> Int {
        let file = try open(path, create: false)
        defer { close(file) }
        let size = try size(file)
        if buffer.count < size { buffer = [UInt8](unsafeUninitializedCapacity: size) { $1 = size } }
        return try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(StorageError) in try read(file, at: 0, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<size])) }
        }.get()
    }

    /// Replaces the file at `path` with `bytes` so that a crash leaves the old file or the new,
    /// never a mix: writes a temporary file, syncs it, renames it over `path`, and syncs the
    /// directory.
    public func replace(_ path: String, with bytes: [UInt8], inDirectory directory: String) throws(StorageError) {
        let temporary = path + ".tmp"
        try remove(temporary)
        let file = try open(temporary, create: true)
        defer { close(file) }
        try write(file, bytes, at: 0)
        try sync(file)
        try rename(temporary, to: path)
        try syncDirectory(directory)
    }
}
