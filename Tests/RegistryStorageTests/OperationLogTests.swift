import Foundation
import RegistryTestSupport
import Testing
@testable import RegistryStorage

@Suite struct OperationLogTests {
    func record(_ sequence: UInt64, origin: String = "node-a", epoch: UInt64 = 7) -> LogRecord {
        LogRecord(origin: origin, epoch: epoch, sequence: sequence, hlc: 1_000 + sequence, payload: [UInt8(sequence), 0xFF])
    }

    @Test func appendsSurviveReopening() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let log = try OperationLog(directory: try DataDirectory(path: temp.path))
            #expect(try log.identity() == nil)
            try log.initialise(NodeIdentity(nodeID: "node-a", epoch: 7))
            try log.append([record(1), record(2)], clock: 5_000)
            try log.append([record(3)], clock: 6_000)
            try log.append([record(1, origin: "node-b", epoch: 3)], clock: 6_001)
        }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        #expect(try log.identity() == NodeIdentity(nodeID: "node-a", epoch: 7))
        #expect(try log.persistedClock() == 6_001)
        #expect(log.recordCount == 4)
        #expect(log.lastSequence(origin: "node-a", epoch: 7) == 3)
        #expect(log.lastSequence(origin: "node-a", epoch: 8) == 0)
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == [record(1), record(2), record(3), record(1, origin: "node-b", epoch: 3)])
    }

    /// With durability deferred to checkpoints, appends followed by a checkpoint are in the
    /// database file itself: a reopened log has them, and the WAL holds nothing more to copy.
    @Test func appendsAreInTheDatabaseAfterACheckpoint() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let log = try OperationLog(directory: try DataDirectory(path: temp.path))
            try log.deferDurabilityToCheckpoints()
            try log.append([record(1), record(2)], clock: 5_000)
            try log.checkpoint()
            try log.append([record(3)], clock: 6_000)
            try log.checkpoint()
            // A checkpoint with nothing new to copy is fine too.
            try log.checkpoint()
        }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == [record(1), record(2), record(3)] && log.recordCount == 3)
        #expect(try log.persistedClock() == 6_000)
    }

    /// A new database uses 64 KiB pages (the header's page-size field holds 1 for 65536).
    @Test func aNewDatabaseHasSixtyFourKibibytePages() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let log = try OperationLog(directory: try DataDirectory(path: temp.path))
            try log.initialise(NodeIdentity(nodeID: "node-a", epoch: 7))
        }
        let header = try [UInt8](Data(contentsOf: URL(fileURLWithPath: temp.path + "/registry.sqlite3")).prefix(100))
        #expect(header.count == 100)
        #expect(header[16] == 0 && header[17] == 1)
    }

    @Test func appendingTheSameEntryTwiceKeepsOne() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.append([record(1)], clock: 1)
        try log.append([record(1), record(2)], clock: 2)
        #expect(log.recordCount == 2)
    }

    @Test func overlappingAppendsKeepOneCopyOfEachRecord() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.append([record(1), record(2), record(3)], clock: 1)
        try log.append([record(2), record(3), record(4), record(5), record(1, origin: "node-b")], clock: 2)
        try log.append([record(5)], clock: 3)
        #expect(log.recordCount == 6)
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == (1...5).map { record($0) } + [record(1, origin: "node-b")])
    }

    @Test func aVersionOneLogIsMigratedWithEveryRecord() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        do {
            // The layout registryd 0.1 wrote: one row per record.
            let old = try SQLiteConnection(path: directory.databasePath)
            try old.execute(
                """
                CREATE TABLE meta (key TEXT PRIMARY KEY, value ANY) WITHOUT ROWID;
                CREATE TABLE oplog (origin TEXT NOT NULL, epoch INTEGER NOT NULL, seq INTEGER NOT NULL,
                    hlc INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (origin, epoch, seq)) WITHOUT ROWID;
                INSERT INTO meta VALUES ('schema_version', 1), ('node_id', 'node-a'), ('epoch', 7), ('hlc', 9000);
                INSERT INTO oplog VALUES ('node-a', 7, 1, 1001, x'01FF'), ('node-a', 7, 2, 1002, x'02FF'),
                    ('node-b', 3, 1, 1001, x'01FF');
                """, context: "writing a version 1 log")
        }
        let log = try OperationLog(directory: directory)
        #expect(log.recordCount == 3)
        #expect(log.lastSequence(origin: "node-a", epoch: 7) == 2)
        #expect(try log.identity() == NodeIdentity(nodeID: "node-a", epoch: 7))
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == [record(1), record(2), record(1, origin: "node-b", epoch: 3)])
    }

    /// Version 2 kept segments in a `WITHOUT ROWID` table; opening one moves them into the rowid
    /// table of version 3, in order, with the log positions and identity unchanged.
    @Test func aVersionTwoLogIsMigratedIntoARowidTable() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        do {
            let log = try OperationLog(directory: directory)
            try log.initialise(NodeIdentity(nodeID: "node-a", epoch: 7))
            try log.append([record(1), record(2)], clock: 10)
            try log.append([record(3)], clock: 11)
            try log.append([record(1, origin: "node-b", epoch: 3)], clock: 12)
            // Put the same rows back into the layout registryd wrote at schema version 2.
            let connection = try SQLiteConnection(path: directory.databasePath)
            try connection.execute(
                """
                CREATE TABLE v2 (origin TEXT NOT NULL, epoch INTEGER NOT NULL, first_seq INTEGER NOT NULL,
                    last_seq INTEGER NOT NULL, count INTEGER NOT NULL, records BLOB NOT NULL,
                    PRIMARY KEY (origin, epoch, first_seq)) WITHOUT ROWID;
                INSERT INTO v2 SELECT * FROM oplog_segments;
                DROP TABLE oplog_segments;
                ALTER TABLE v2 RENAME TO oplog_segments;
                UPDATE meta SET value = 2 WHERE key = 'schema_version';
                """, context: "writing a version 2 log")
        }
        let log = try OperationLog(directory: directory)
        #expect(log.recordCount == 4)
        #expect(log.lastSequence(origin: "node-a", epoch: 7) == 3)
        #expect(try log.identity() == NodeIdentity(nodeID: "node-a", epoch: 7))
        #expect(try log.persistedClock() == 12)
        try log.append([record(4)], clock: 13)
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == [record(1), record(2), record(3), record(4), record(1, origin: "node-b", epoch: 3)])

        let connection = try SQLiteConnection(path: directory.databasePath)
        let table = try connection.scalarText(
            "SELECT sql FROM sqlite_master WHERE name = 'oplog_segments'", context: "reading the schema")
        #expect(table?.contains("WITHOUT ROWID") == false)
        #expect(try connection.scalarText("SELECT value FROM meta WHERE key = 'schema_version'", context: "version") == "3")
        #expect(try connection.scalarText("SELECT count(*) FROM sqlite_master WHERE name = 'oplog_segments_v2'", context: "old") == "0")
    }

    @Test func aTruncatedSegmentIsATypedError() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = try DataDirectory(path: temp.path)
        do {
            let log = try OperationLog(directory: directory)
            try log.append([record(1), record(2)], clock: 1)
            let connection = try SQLiteConnection(path: directory.databasePath)
            try connection.execute("UPDATE oplog_segments SET records = substr(records, 1, 30)", context: "truncating")
        }
        let log = try OperationLog(directory: directory)
        #expect {
            try log.forEach { _ in }
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.contains("ends inside")
        }
    }

    @Test func aMissingDirectoryIsATypedError() {
        #expect(throws: StorageError.missingDirectory("/nonexistent/registry")) {
            try DataDirectory(path: "/nonexistent/registry")
        }
    }

    @Test func aFileInsteadOfADirectoryIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let file = temp.path + "/plain-file"
        _ = FileManager.default.createFile(atPath: file, contents: Data())
        #expect(throws: StorageError.notWritable(file, reason: "it is not a directory")) {
            try DataDirectory(path: file)
        }
    }

    // A read-only data directory: root ignores permission bits, and CI runs as root, so
    // `DaemonTests.aReadOnlyDataDirectoryIsRefused` checks it on a read-only mount instead.

    @Test func twoOwnersOfOneDirectoryAreRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let first = try DataDirectory(path: temp.path)
            #expect(throws: StorageError.locked(temp.path)) { try DataDirectory(path: temp.path) }
            withExtendedLifetime(first) {}
        }
        // Released with its owner.
        #expect((try? DataDirectory(path: temp.path)) != nil)
    }

    @Test func aDatabaseThatIsNotSQLiteIsATypedError() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        _ = FileManager.default.createFile(
            atPath: temp.path + "/registry.sqlite3", contents: Data(repeating: 0x42, count: 4096))
        #expect(throws: StorageError.self) { try OperationLog(directory: try DataDirectory(path: temp.path)) }
    }
}

