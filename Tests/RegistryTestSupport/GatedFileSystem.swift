import Dispatch
import RegistryStorage
import Synchronization

/// The real disk, with one call held: the first rename whose destination's name starts with
/// `prefix`, or the next sync after ``holdNextSync()``, or the next removal after
/// ``holdNextRemove()``, is reached (``waitUntilReached(seconds:)``)
/// and then waits for ``open()``, at most ``holdSeconds``. A test uses it to act while the code
/// that renames or syncs is stopped at that point (a snapshot install or a commit, inside the log
/// writer's queue), so that a race that depends on timing happens every time.
public final class GatedFileSystem: FileSystem, Sendable {
    private let inner = PosixFileSystem()
    private let prefix: String
    /// Signalled once the held rename is reached.
    private let reached = DispatchSemaphore(value: 0)
    /// How long a held call waits for ``open()`` before going on by itself: a test that failed
    /// before opening it fails, rather than hangs.
    public static let holdSeconds = 120
    private let gate = DispatchSemaphore(value: 0)
    private let armed: Mutex<Bool>
    private let syncArmed = Mutex(false)
    private let removeArmed = Mutex(false)

    /// `prefix` nil: no rename is held.
    public init(holdingRenamesTo prefix: String?) {
        self.prefix = prefix ?? ""
        armed = Mutex(prefix != nil)
    }

    /// Holds the next sync, until ``open()``.
    public func holdNextSync() {
        syncArmed.withLock { $0 = true }
    }

    /// Holds the next removal of a file, until ``open()``.
    public func holdNextRemove() {
        removeArmed.withLock { $0 = true }
    }

    /// Lets the held rename go on.
    public func open() { gate.signal() }

    /// Waits until the held call is reached, up to `seconds`; false when it was not, and then the
    /// gate is opened, so that a call reached later (into a directory the failed test removes)
    /// goes on at once. It polls, rather than block one of the few threads that run tasks (as
    /// many as cores), which the code that reaches the call may need.
    public func waitUntilReached(seconds: Int = 60) async -> Bool {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while reached.wait(timeout: .now()) != .success {
            guard DispatchTime.now() < deadline else {
                open()
                return false
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    public func rename(_ source: String, to destination: String) throws(StorageError) {
        let name = destination.split(separator: "/").last.map(String.init) ?? destination
        if name.hasPrefix(prefix) { holdOnce(armed) }
        try inner.rename(source, to: destination)
    }

    /// When `armed` is set, clears it, signals that the held call is reached and waits for ``open()``.
    private func holdOnce(_ armed: borrowing Mutex<Bool>) {
        let hold = armed.withLock { armed in
            defer { armed = false }
            return armed
        }
        if hold {
            reached.signal()
            _ = gate.wait(timeout: .now() + .seconds(Self.holdSeconds))
        }
    }

    public func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle { try inner.open(path, create: create) }
    public func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle { try inner.openBypassingCache(path) }
    public func isBypassingCache(_ file: FileHandle) -> Bool { inner.isBypassingCache(file) }
    public func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
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
        holdOnce(syncArmed)
        try inner.sync(file)
    }
    public func close(_ file: FileHandle) { inner.close(file) }
    public func remove(_ path: String) throws(StorageError) {
        holdOnce(removeArmed)
        try inner.remove(path)
    }
    public func list(_ directory: String) throws(StorageError) -> [String] { try inner.list(directory) }
    public func syncDirectory(_ directory: String) throws(StorageError) { try inner.syncDirectory(directory) }
    public func availableBytes(in directory: String) throws(StorageError) -> UInt64 { try inner.availableBytes(in: directory) }
}
