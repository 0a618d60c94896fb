import CSQLite
import Dispatch

/// Moves committed WAL pages into the database file in the background.
///
/// SQLite's automatic checkpoint runs inside whichever commit pushes the WAL past its limit:
/// that commit copies megabytes and syncs the database file while every registration waiting
/// on it waits too (a few milliseconds every third of a second under load). The log turns the
/// automatic checkpoint off and this checkpointer runs passive checkpoints from its own
/// connection on its own queue, which never block the writer.
///
/// `@unchecked Sendable`: `connection` and `stopped` are touched only on `queue` (a serial
/// DispatchQueue) after `init`, which sets them before any closure exists.
public final class WALCheckpointer: @unchecked Sendable {
    private let queue = DispatchQueue(label: "registry.wal-checkpoint")
    private var connection: SQLiteConnection?
    private var stopped = false
    private let interval: DispatchTimeInterval
    /// Checkpoints that failed (busy or I/O) and WAL frames not yet copied at the last one;
    /// the next attempt retries. Read on `queue`.
    private(set) var failures = 0
    private(set) var framesBehind: Int32 = 0

    /// Opens a second connection to the log in `directory` and checkpoints every `interval`.
    public init(directory: DataDirectory, interval: DispatchTimeInterval = .milliseconds(250)) throws(StorageError) {
        let connection = try SQLiteConnection(path: directory.databasePath)
        // A connection learns that the database is in WAL mode when it first reads it; until
        // then a checkpoint call does nothing.
        let mode = try connection.scalarText("PRAGMA journal_mode", context: "opening the checkpointer")
        guard mode?.lowercased() == "wal" else {
            throw .notWritable(directory.path, reason: "the log is not in WAL mode (journal_mode=\(mode ?? "nil"))")
        }
        self.connection = connection
        self.interval = interval
        queue.asyncAfter(deadline: .now() + interval) { self.run() }
    }

    private func run() {
        guard !stopped, let connection else { return }
        var logFrames: Int32 = 0
        var checkpointed: Int32 = 0
        let code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &checkpointed)
        if code != SQLITE_OK { failures += 1 }
        framesBehind = logFrames - checkpointed
        queue.asyncAfter(deadline: .now() + interval) { self.run() }
    }

    /// Runs one checkpoint now and returns the WAL frames it left behind, or nil when it
    /// failed. For tests and shutdown.
    public func checkpointNow() -> Int32? {
        queue.sync {
            guard let connection else { return nil }
            var logFrames: Int32 = 0
            var checkpointed: Int32 = 0
            let code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &checkpointed)
            return code == SQLITE_OK && logFrames >= 0 ? logFrames - checkpointed : nil
        }
    }

    /// Stops checkpointing and closes the connection; waits for a checkpoint in progress.
    public func stop() {
        queue.sync {
            stopped = true
            connection = nil
        }
    }
}
