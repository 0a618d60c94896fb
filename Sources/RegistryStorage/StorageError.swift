/// Why storage could not be opened, read or written.
public enum StorageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The data directory does not exist.
    case missingDirectory(String)
    /// The data directory exists but is not a directory, or cannot be written.
    case notWritable(String, reason: String)
    /// Another process holds the data directory's lock.
    case locked(String)
    /// Storage holds something this version cannot read, or that was damaged.
    case corrupt(String)
    /// A file of the data directory could not be created, written, synced, read or removed.
    case io(path: String, reason: String)
    /// A writer that failed earlier refuses to go on (the journal after a failed write, sync or
    /// rotation); a restart recovers from what the disk holds.
    case stopped(String)

    public var description: String {
        switch self {
        case .missingDirectory(let path): return "data directory \(path) does not exist; create it first"
        case .notWritable(let path, let reason): return "data directory \(path) is not usable: \(reason)"
        case .locked(let path): return "data directory \(path) is in use by another registryd (its LOCK file is held)"
        case .corrupt(let reason): return "storage is corrupt: \(reason)"
        case .io(let path, let reason): return "I/O error on \(path): \(reason)"
        case .stopped(let reason): return "storage stopped: \(reason)"
        }
    }
}
