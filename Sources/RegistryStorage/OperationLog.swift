import CSQLite

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
/// only once its records survive a crash or power loss. Many records share one transaction and
/// one row (``LogSegment``). registryd's commits go to the ``CommitJournal`` alone; what the journal
/// holds moves in here at the next start-up, or earlier, file by file, while the node is quiet.
///
/// Records of one (origin, epoch) are appended in increasing sequence order; a record at or
/// below the last stored sequence of its (origin, epoch) is a duplicate and is skipped, so
/// appends are idempotent.
///
/// Not thread-safe: the owner confines it to one thread or queue.
public final class OperationLog {
    /// 3: one row per segment of records, in a rowid table. Version 1 (one row per record) and
    /// version 2 (segments in a `WITHOUT ROWID` table) are migrated on open.
    public static let schemaVersion = 3

    /// The segment table. A rowid table, not `WITHOUT ROWID` (version 2): there the whole row is
    /// the B-tree key, and SQLite reads a cell's entire payload, overflow pages and all, to compare
    /// keys with it. Every insert's descent then read several of the megabyte blobs it passed (8.7
    /// MB an insert, over 300 inserts of 1 MB). Here the key is the rowid, and the
    /// (origin, epoch, first_seq) index holds only small keys.
    static let createSegmentTable = """
        CREATE TABLE IF NOT EXISTS oplog_segments (
            origin TEXT NOT NULL, epoch INTEGER NOT NULL, first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL, count INTEGER NOT NULL, records BLOB NOT NULL,
            PRIMARY KEY (origin, epoch, first_seq));
        """

    private let directory: DataDirectory
    private let connection: SQLiteConnection
    private let insert: SQLiteStatement
    private let saveMeta: SQLiteStatement
    /// Prepared once: `sqlite3_exec` would parse them again on every group commit.
    private let begin: SQLiteStatement
    private let commit: SQLiteStatement
    private let rollback: SQLiteStatement
    private let walCheckpoint: SQLiteStatement
    public private(set) var recordCount: UInt64
    /// The last stored sequence of every (origin, epoch).
    private var lastSequences: [OriginEpoch: UInt64] = [:]

    private struct OriginEpoch: Hashable {
        let origin: String
        let epoch: UInt64
    }

    /// Opens (creating if needed) the log in `directory`.
    public init(directory: DataDirectory) throws(StorageError) {
        self.directory = directory
        connection = try SQLiteConnection(path: directory.databasePath)
        // Rows are segment blobs of up to a megabyte: 64 KiB pages cut the pages (and WAL frames,
        // checksums and checkpoint copies) per row sixteenfold. Only a new database takes it.
        try connection.execute("PRAGMA page_size=65536", context: "setting the page size")
        let mode = try connection.scalarText("PRAGMA journal_mode=WAL", context: "enabling WAL")
        guard mode?.lowercased() == "wal" else {
            throw .notWritable(directory.path, reason: "SQLite refused WAL mode (journal_mode=\(mode ?? "nil"))")
        }
        // SQLite's default checkpoint interval (1000 pages, 64 MiB here): at start-up registryd
        // moved 3M journaled operations in 1.3 s, against 2.0 s with a checkpoint every 32 pages.
        // A serving node's small moves call ``checkpoint()`` after each transaction instead.
        try connection.execute(
            """
            PRAGMA synchronous=FULL;
            PRAGMA busy_timeout=5000;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
            """ + Self.createSegmentTable, context: "creating the schema")
        insert = try connection.prepare(
            "INSERT INTO oplog_segments (origin, epoch, first_seq, last_seq, count, records) VALUES (?, ?, ?, ?, ?, ?)",
            context: "segment insert")
        saveMeta = try connection.prepare(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            context: "meta upsert")
        begin = try connection.prepare("BEGIN IMMEDIATE", context: "preparing BEGIN")
        commit = try connection.prepare("COMMIT", context: "preparing COMMIT")
        rollback = try connection.prepare("ROLLBACK", context: "preparing ROLLBACK")
        walCheckpoint = try connection.prepare("PRAGMA wal_checkpoint(PASSIVE)", context: "preparing the checkpoint")
        recordCount = 0
        try checkSchemaVersion()
        let positions = try connection.prepare(
            "SELECT origin, epoch, max(last_seq), sum(count) FROM oplog_segments GROUP BY origin, epoch",
            context: "reading log positions")
        while try positions.step(context: "reading log positions") {
            lastSequences[OriginEpoch(origin: positions.text(at: 0) ?? "", epoch: positions.uint64(at: 1))] =
                positions.uint64(at: 2)
            recordCount += positions.uint64(at: 3)
        }
    }

    private func checkSchemaVersion() throws(StorageError) {
        switch try metaInteger("schema_version") {
        case nil:
            try setMeta("schema_version", UInt64(Self.schemaVersion))
        case 1:
            try migrateFromRecordRows()
        case 2:
            try migrateFromKeyedSegments()
        case UInt64(Self.schemaVersion):
            break
        case let stored?:
            throw .corrupt("schema version \(stored) is not \(Self.schemaVersion), which this registryd reads")
        }
    }

    /// Version 1 kept one row per record in `oplog`; moves them into segments of up to 1000.
    private func migrateFromRecordRows() throws(StorageError) {
        try transaction { () throws(StorageError) in
            let rows = try connection.prepare(
                "SELECT origin, epoch, seq, hlc, payload FROM oplog ORDER BY origin, epoch, seq", context: "migrating the log")
            var segment: LogSegment?
            while try rows.step(context: "migrating the log") {
                let origin = rows.text(at: 0) ?? ""
                let epoch = rows.uint64(at: 1)
                if let current = segment, current.origin != origin || current.epoch != epoch || current.count == 1000 {
                    try insertSegment(current)
                    segment = nil
                }
                if segment == nil { segment = LogSegment(origin: origin, epoch: epoch) }
                segment!.append(sequence: rows.uint64(at: 2), hlc: rows.uint64(at: 3), payload: rows.blob(at: 4))
            }
            if let segment { try insertSegment(segment) }
            try connection.execute("DROP TABLE oplog", context: "migrating the log")
            try setMeta("schema_version", UInt64(Self.schemaVersion))
        }
    }

    /// Version 2 kept the segments in a `WITHOUT ROWID` table; copies them, in key order, into
    /// the rowid table of version 3 (see ``createSegmentTable``).
    private func migrateFromKeyedSegments() throws(StorageError) {
        try transaction { () throws(StorageError) in
            try connection.execute(
                "ALTER TABLE oplog_segments RENAME TO oplog_segments_v2;" + Self.createSegmentTable
                    + """
                    INSERT INTO oplog_segments (origin, epoch, first_seq, last_seq, count, records)
                        SELECT origin, epoch, first_seq, last_seq, count, records FROM oplog_segments_v2
                        ORDER BY origin, epoch, first_seq;
                    DROP TABLE oplog_segments_v2;
                    """, context: "migrating the log from version 2")
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

    /// Appends `records` and the clock in one durable transaction, skipping records already
    /// stored (see the type's notes), so appends are idempotent.
    public func append(_ records: [LogRecord], clock: UInt64) throws(StorageError) {
        var segments = [LogSegment]()
        for record in records {
            if segments.last.map({ $0.origin != record.origin || $0.epoch != record.epoch }) ?? true {
                segments.append(LogSegment(origin: record.origin, epoch: record.epoch))
            }
            guard record.sequence > segments[segments.count - 1].lastSequence else { continue }
            segments[segments.count - 1].append(sequence: record.sequence, hlc: record.hlc, payload: record.payload)
        }
        try append(segments, clock: clock)
    }

    /// Appends whole segments and the clock in one durable transaction. Leading records at or
    /// below the last stored sequence of their (origin, epoch) are skipped.
    public func append(_ segments: [LogSegment], clock: UInt64) throws(StorageError) {
        var stored = [LogSegment]()
        for segment in segments where segment.count > 0 {
            let key = OriginEpoch(origin: segment.origin, epoch: segment.epoch)
            let last = lastSequences[key] ?? 0
            if segment.firstSequence > last {
                stored.append(segment)
            } else if segment.lastSequence > last {
                stored.append(try segment.dropping(through: last))
            }
        }
        try transaction { () throws(StorageError) in
            for segment in stored { try insertSegment(segment) }
            try setMeta("hlc", clock)
        }
        for segment in stored {
            lastSequences[OriginEpoch(origin: segment.origin, epoch: segment.epoch)] = segment.lastSequence
            recordCount += UInt64(segment.count)
        }
    }

    private func insertSegment(_ segment: LogSegment) throws(StorageError) {
        insert.bind(segment.origin, at: 1)
        insert.bind(segment.epoch, at: 2)
        insert.bind(segment.firstSequence, at: 3)
        insert.bind(segment.lastSequence, at: 4)
        insert.bind(UInt64(segment.count), at: 5)
        insert.bind(segment.bytes, at: 6)
        try insert.run(context: "appending to the log")
    }

    /// From now on, a transaction is durable once a later ``checkpoint()`` has returned, not when
    /// it commits (SQLite's `synchronous=NORMAL`): for a series of small appends, each followed by
    /// a checkpoint, this saves the WAL sync of every commit; the checkpoint syncs the WAL before
    /// copying it and the database after. A crash may take back appends made since the last
    /// checkpoint, so a caller keeps their source until then.
    public func deferDurabilityToCheckpoints() throws(StorageError) {
        try connection.execute("PRAGMA synchronous=NORMAL", context: "deferring durability to checkpoints")
    }

    /// Copies what the WAL holds into the database file and syncs it (a passive checkpoint: it
    /// waits for no reader), and throws unless it copied every frame: after it returns, every
    /// append so far is durable. After a small transaction this keeps each checkpoint small,
    /// where SQLite's own would copy 64 MiB at once.
    public func checkpoint() throws(StorageError) {
        defer { walCheckpoint.reset() }
        guard try walCheckpoint.step(context: "checkpointing the log") else {
            throw .sqlite(code: SQLITE_ERROR, message: "the checkpoint returned no row", context: "checkpointing the log")
        }
        let (busy, frames, copied) = (walCheckpoint.int64(at: 0), walCheckpoint.int64(at: 1), walCheckpoint.int64(at: 2))
        guard busy == 0, copied == frames else {
            throw .sqlite(
                code: SQLITE_BUSY, message: "the checkpoint copied \(copied) of \(frames) WAL frames", context: "checkpointing the log")
        }
    }

    /// The highest sequence number written by (origin, epoch), 0 when none.
    public func lastSequence(origin: String, epoch: UInt64) -> UInt64 {
        lastSequences[OriginEpoch(origin: origin, epoch: epoch)] ?? 0
    }

    /// Calls `body` with every record, ordered by (origin, epoch, sequence).
    public func forEach(_ body: (LogRecord) throws(StorageError) -> Void) throws(StorageError) {
        let statement = try connection.prepare(
            "SELECT origin, epoch, records FROM oplog_segments ORDER BY origin, epoch, first_seq", context: "reading the log")
        while try statement.step(context: "reading the log") {
            let records = try LogSegment.records(
                origin: statement.text(at: 0) ?? "", epoch: statement.uint64(at: 1), blob: statement.blob(at: 2))
            for record in records { try body(record) }
        }
    }

    // MARK: - Helpers

    private func transaction(_ body: () throws(StorageError) -> Void) throws(StorageError) {
        try begin.run(context: "beginning a transaction")
        do {
            try body()
            try commit.run(context: "committing")
        } catch {
            try? rollback.run(context: "rolling back")
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
