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
        #expect(try log.lastSequence(origin: "node-a", epoch: 7) == 3)
        #expect(try log.lastSequence(origin: "node-a", epoch: 8) == 0)
        var seen = [LogRecord]()
        try log.forEach { seen.append($0) }
        #expect(seen == [record(1), record(2), record(3), record(1, origin: "node-b", epoch: 3)])
    }

    @Test func appendingTheSameEntryTwiceKeepsOne() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        try log.append([record(1)], clock: 1)
        try log.append([record(1), record(2)], clock: 2)
        #expect(log.recordCount == 2)
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

    @Test func aReadOnlyDirectoryIsRefused() throws {
        // Root ignores permission bits, so this case is only checked for other users.
        guard getuid() != 0 else { return }
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        chmod(temp.path, 0o500)
        defer { chmod(temp.path, 0o700) }
        #expect(throws: StorageError.self) { try DataDirectory(path: temp.path) }
    }

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
