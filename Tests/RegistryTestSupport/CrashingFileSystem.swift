import RegistryStorage
import Synchronization

/// The simulated disk, failing every call that would change it after the first `failingAfter` of
/// them, as a process that died there would stop making them. Then ``SimulatedFileSystem/crash(tearing:)``
/// on ``inner`` plays the power cut, and recovery runs on what is left.
///
/// A process that dies stops every thread at once; an engine the simulation lets go of does not:
/// work it queued (a trim the retention floor asked for) may still run. ``die()`` makes this disk
/// refuse every change from then on, so that such work cannot change the disk the node restarts
/// on (it once removed a journal file after the crash restored it: a gap at the next start).
public final class CrashingFileSystem: FileSystem, Sendable {
    public let inner: SimulatedFileSystem
    private let counts = Mutex((calls: 0, failingAfter: 0, dead: false))

    /// Changes after the first this many fail.
    public var failingAfter: Int {
        get { counts.withLock { $0.failingAfter } }
        set { counts.withLock { $0.failingAfter = newValue } }
    }
    /// Calls that would change the disk, so far.
    public var calls: Int { counts.withLock { $0.calls } }

    public init(_ inner: SimulatedFileSystem, failingAfter calls: Int) {
        self.inner = inner
        counts.withLock { $0.failingAfter = calls }
    }

    /// The process died: every change from now on fails, whatever ``failingAfter`` says.
    public func die() {
        counts.withLock { $0.dead = true }
    }

    private func step() throws(StorageError) {
        let refused = counts.withLock { counts in
            counts.calls += 1
            return counts.dead || counts.calls > counts.failingAfter
        }
        if refused { throw StorageError.io(path: "", reason: "the process died here") }
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
