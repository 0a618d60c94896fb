/// One entry of a node's durable log. (origin, epoch, sequence) names it uniquely; the payload
/// is an encoded `registry.v1.Operation`.
public struct LogRecord: Hashable, Sendable {
    public let origin: String
    public let epoch: UInt64
    public let sequence: UInt64
    public let hlc: UInt64
    public let payload: [UInt8]

    public init(origin: String, epoch: UInt64, sequence: UInt64, hlc: UInt64, payload: [UInt8]) {
        self.origin = origin
        self.epoch = epoch
        self.sequence = sequence
        self.hlc = hlc
        self.payload = payload
    }
}

/// Who this data directory belongs to, fixed when it is first initialised.
public struct NodeIdentity: Hashable, Sendable {
    public let nodeID: String
    /// Chosen at initialisation; a node whose data was wiped comes back with a new epoch and so
    /// never reuses a sequence number.
    public let epoch: UInt64

    public init(nodeID: String, epoch: UInt64) {
        self.nodeID = nodeID
        self.epoch = epoch
    }
}

/// The durable per-origin operation log in SQLite (WAL, `synchronous=FULL`): an append returns
/// only once its records survive a crash or power loss. Many records share one transaction, so
/// one fsync acknowledges a whole group of registrations.
///
/// Not thread-safe: the owner confines it to one thread or queue.
public final class OperationLog {
    public static let schemaVersion = 1

    private let directory: DataDirectory
    private let connection: SQLiteConnection
    private let insert: SQLiteStatement
    private let saveMeta: SQLiteStatement
    public private(set) var recordCount: UInt64

    /// Opens (creating if needed) the log in `directory`.
    public init(directory: DataDirectory) throws(StorageError) {
        self.directory = directory
        connection = try SQLiteConnection(path: directory.databasePath)
        let mode = try connection.scalarText("PRAGMA journal_mode=WAL", context: "enabling WAL")
        guard mode?.lowercased() == "wal" else {
            throw .notWritable(directory.path, reason: "SQLite refused WAL mode (journal_mode=\(mode ?? "nil"))")
        }
        try connection.execute(
            """
            PRAGMA synchronous=FULL;
            PRAGMA busy_timeout=5000;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS oplog (
                origin TEXT NOT NULL, epoch INTEGER NOT NULL, seq INTEGER NOT NULL,
                hlc INTEGER NOT NULL, payload BLOB NOT NULL,
                PRIMARY KEY (origin, epoch, seq)) WITHOUT ROWID;
            """, context: "creating the schema")
        insert = try connection.prepare(
            "INSERT OR IGNORE INTO oplog (origin, epoch, seq, hlc, payload) VALUES (?, ?, ?, ?, ?)", context: "oplog insert")
        saveMeta = try connection.prepare(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            context: "meta upsert")
        let count = try connection.prepare("SELECT count(*) FROM oplog", context: "counting the log")
        _ = try count.step(context: "counting the log")
        recordCount = count.uint64(at: 0)
        try checkSchemaVersion()
    }

    private func checkSchemaVersion() throws(StorageError) {
        if let stored = try metaInteger("schema_version") {
            guard stored == UInt64(Self.schemaVersion) else {
                throw .corrupt("schema version \(stored) is not \(Self.schemaVersion), which this registryd reads")
            }
        } else {
            try setMeta("schema_version", UInt64(Self.schemaVersion))
        }
    }

    // MARK: - Identity and clock

    /// The identity this directory was initialised with, or nil for a new directory.
    public func identity() throws(StorageError) -> NodeIdentity? {
        guard let nodeID = try metaText("node_id") else { return nil }
        guard let epoch = try metaInteger("epoch") else { throw .corrupt("meta has node_id but no epoch") }
        return NodeIdentity(nodeID: nodeID, epoch: epoch)
    }

    /// Records the identity of a new directory, durably.
    public func initialise(_ identity: NodeIdentity) throws(StorageError) {
        try transaction { () throws(StorageError) in
            try setMeta("node_id", identity.nodeID)
            try setMeta("epoch", identity.epoch)
        }
    }

    /// The highest HLC value this node persisted (0 for a new directory).
    public func persistedClock() throws(StorageError) -> UInt64 {
        try metaInteger("hlc") ?? 0
    }

    // MARK: - Log

    /// Appends `records` and the clock in one durable transaction. Records already present
    /// (same origin, epoch and sequence) are left as they are, so appends are idempotent.
    public func append(_ records: [LogRecord], clock: UInt64) throws(StorageError) {
        var added: UInt64 = 0
        try transaction { () throws(StorageError) in
            for record in records {
                insert.bind(record.origin, at: 1)
                insert.bind(record.epoch, at: 2)
                insert.bind(record.sequence, at: 3)
                insert.bind(record.hlc, at: 4)
                insert.bind(record.payload, at: 5)
                try insert.run(context: "appending to the log")
                added += UInt64(connection.changes)
            }
            try setMeta("hlc", clock)
        }
        recordCount += added
    }

    /// The highest sequence number written by (origin, epoch), 0 when none.
    public func lastSequence(origin: String, epoch: UInt64) throws(StorageError) -> UInt64 {
        let statement = try connection.prepare(
            "SELECT coalesce(max(seq), 0) FROM oplog WHERE origin = ? AND epoch = ?", context: "reading the last sequence")
        statement.bind(origin, at: 1)
        statement.bind(epoch, at: 2)
        _ = try statement.step(context: "reading the last sequence")
        return statement.uint64(at: 0)
    }

    /// Calls `body` with every record, ordered by (origin, epoch, sequence).
    public func forEach(_ body: (LogRecord) throws(StorageError) -> Void) throws(StorageError) {
        let statement = try connection.prepare(
            "SELECT origin, epoch, seq, hlc, payload FROM oplog ORDER BY origin, epoch, seq", context: "reading the log")
        while try statement.step(context: "reading the log") {
            try body(
                LogRecord(
                    origin: statement.text(at: 0) ?? "", epoch: statement.uint64(at: 1), sequence: statement.uint64(at: 2),
                    hlc: statement.uint64(at: 3), payload: statement.blob(at: 4)))
        }
    }

    // MARK: - Helpers

    private func transaction(_ body: () throws(StorageError) -> Void) throws(StorageError) {
        try connection.execute("BEGIN IMMEDIATE", context: "beginning a transaction")
        do {
            try body()
            try connection.execute("COMMIT", context: "committing")
        } catch {
            try? connection.execute("ROLLBACK", context: "rolling back")
            throw error
        }
    }

    private func setMeta(_ key: String, _ value: UInt64) throws(StorageError) {
        saveMeta.bind(key, at: 1)
        saveMeta.bind(value, at: 2)
        try saveMeta.run(context: "writing meta \(key)")
    }

    private func setMeta(_ key: String, _ value: String) throws(StorageError) {
        saveMeta.bind(key, at: 1)
        saveMeta.bind(value, at: 2)
        try saveMeta.run(context: "writing meta \(key)")
    }

    private func metaInteger(_ key: String) throws(StorageError) -> UInt64? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = ?", context: "reading meta")
        statement.bind(key, at: 1)
        guard try statement.step(context: "reading meta \(key)") else { return nil }
        return statement.uint64(at: 0)
    }

    private func metaText(_ key: String) throws(StorageError) -> String? {
        let statement = try connection.prepare("SELECT value FROM meta WHERE key = ?", context: "reading meta")
        statement.bind(key, at: 1)
        guard try statement.step(context: "reading meta \(key)") else { return nil }
        return statement.text(at: 0)
    }
}
