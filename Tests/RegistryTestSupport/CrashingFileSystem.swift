import RegistryStorage

/// The simulated disk, failing every call that would change it after the first `failingAfter` of
/// them, as a process that died there would stop making them. Then ``SimulatedFileSystem/crash(tearing:)``
/// on ``inner`` plays the power cut, and recovery runs on what is left.
public final class CrashingFileSystem: FileSystem, @unchecked Sendable {
    // @unchecked Sendable: used from one test thread (and a queue it waits on) at a time.
    public let inner: SimulatedFileSystem
    public var failingAfter: Int
    /// Calls that would change the disk, so far.
    public private(set) var calls = 0

    public init(_ inner: SimulatedFileSystem, failingAfter calls: Int) {
        self.inner = inner
        self.failingAfter = calls
    }

    private func step() throws(StorageError) {
        calls += 1
        if calls > failingAfter { throw StorageError.io(path: "", reason: "the process died here") }
    }

    public func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle {
        try step()
        return try inner.open(path, create: create)
    }
    public func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle {
        try step()
        return try inner.openBypassingCache(path)
    }
    public func isBypassingCache(_ file: FileHandle) -> Bool { inner.isBypassingCache(file) }
    public func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
        try step()
        try inner.write(file, bytes, at: offset)
    }
    public func read(_ file: FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        try inner.read(file, at: offset, count: count)
    }
    public func read(_ file: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int {
        try inner.read(file, at: offset, into: buffer)
    }
    public func size(_ file: FileHandle) throws(StorageError) -> Int { try inner.size(file) }
    public func sync(_ file: FileHandle) throws(StorageError) {
        try step()
        try inner.sync(file)
    }
    public func close(_ file: FileHandle) { inner.close(file) }
    public func rename(_ source: String, to destination: String) throws(StorageError) {
        try step()
        try inner.rename(source, to: destination)
    }
    public func remove(_ path: String) throws(StorageError) {
        try step()
        try inner.remove(path)
    }
    public func list(_ directory: String) throws(StorageError) -> [String] { try inner.list(directory) }
    public func availableBytes(in directory: String) throws(StorageError) -> UInt64 { try inner.availableBytes(in: directory) }

    public func syncDirectory(_ directory: String) throws(StorageError) {
        try step()
        try inner.syncDirectory(directory)
    }
}
