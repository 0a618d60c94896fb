import Platform

/// A node's data directory, checked and locked so that two processes never share one.
/// The lock is an exclusive `flock` on `LOCK`, released when the process exits, even by `kill -9`.
public final class DataDirectory: Sendable {
    public let path: String
    private let lockDescriptor: Int32

    public init(path: String) throws(StorageError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { throw .missingDirectory(path) }
            throw .notWritable(path, reason: String(cString: strerror(errno)))
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw .notWritable(path, reason: "it is not a directory") }
        guard access(path, W_OK | X_OK) == 0 else {
            throw .notWritable(path, reason: "no write permission (\(String(cString: strerror(errno))))")
        }
        let lockPath = path + "/LOCK"
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .notWritable(path, reason: "cannot create \(lockPath): \(String(cString: strerror(errno)))")
        }
        // A LOCK an older version made readable by all is made its user's only, as every file here.
        _ = fchmod(descriptor, 0o600)
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw .locked(path)
        }
        self.path = path
        self.lockDescriptor = descriptor
    }

    deinit {
        flock(lockDescriptor, LOCK_UN)
        close(lockDescriptor)
    }

    /// The SQLite database that data directories of earlier versions held; this version refuses
    /// such a directory rather than read it.
    public static let legacyDatabaseName = "registry.sqlite3"
}
