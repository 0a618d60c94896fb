import Foundation
import Logging
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// A serving engine moves the journal files it has finished into its SQLite log while it is
/// quiet, and a restart then has only the current file to move.
@Suite(.timeLimit(.minutes(3))) struct JournalMoverTests: EngineTesting {
    func open(_ path: String, moveBelow: Int, spares: Int = 1) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID("node-a")
        configuration.journalFileBytes = 64 << 10
        configuration.moveJournalBelowOperationsPerSecond = moveBelow
        configuration.journalSpares = spares
        return try RegistryEngine(configuration: configuration, logger: .quiet())
    }

    /// Registers `count` new devices in batches of 100 and returns their device IDs.
    func register(_ engine: RegistryEngine, count: Int, from first: Int = 0) async -> [String] {
        var ids = [String]()
        for start in stride(from: first, to: first + count, by: 100) {
            let batch = (start..<start + 100).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: 9, low: UInt64($0) + 1).text) }
            for answer in await submit(engine, [.registerBatch(batch)]) {
                guard case .registerBatchResult(let results) = answer else { continue }
                ids += results.compactMap { if case .result(let result) = $0 { result.deviceID } else { nil } }
            }
        }
        return ids
    }

    func journalFiles(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasPrefix("journal-") }.sorted()
    }

    /// Polls `condition` every 20 ms for up to 2 minutes: the mover runs at `SCHED_IDLE`, so it
    /// gets no CPU while other suites keep both cores busy (SlowReaderTests' node does for
    /// about 20 s in a debug build).
    func eventually(_ condition: () throws -> Bool) async throws -> Bool {
        for _ in 0..<6_000 {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try condition()
    }

    @Test func finishedFilesMoveWhileServingAndARestartMovesOnlyTheRest() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var ids = [String]()
        do {
            let engine = try open(temp.path, moveBelow: JournalMovePolicy.defaultQuietOperationsPerSecond)
            // About 150 bytes of journal a registration: 3,000 of them fill several 64 KiB files.
            ids = await register(engine, count: 3_000)
            #expect(ids.count == 3_000)
            // Quiet now (and maybe already while registering, on a busy machine): every finished
            // file moves, and only the current one is left.
            #expect(try await eventually { try engine.stats().journalFiles == 1 && journalFiles(temp.path).count == 1 })
            #expect(try journalFiles(temp.path).first.map { $0 > "journal-000000000004.log" } == true, "four or more files finished")
            // What is left to move is the current file's: at most a file and one batch's entry.
            let left = engine.stats()
            #expect(left.journalBytes > 0 && left.journalBytes <= 64 << 10 + 20_000)
            #expect(left.logOperations == 3_000)
            // A retired file is the spare that a later rotation writes over.
            #expect(!CommitJournal.spareNames(inDirectoryAt: temp.path).isEmpty)
            ids += await register(engine, count: 300, from: 3_000)
            engine.close()
        }
        // The log holds every moved operation; the restart moves the last file and replays the rest.
        do {
            let log = try OperationLog(directory: try DataDirectory(path: temp.path))
            #expect(log.recordCount > 2_000 && log.recordCount < 3_300)
        }
        let engine = try open(temp.path, moveBelow: 0)
        defer { engine.close() }
        #expect(engine.stats().deviceCount == 3_300)
        #expect(try journalFiles(temp.path).count == 1)
        let sample = [ids[0], ids[1_499], ids[2_999], ids[3_299]]
        for id in sample {
            let answers = await submit(engine, [.resolve(deviceID: id)])
            guard case .device(let record) = answers[0] else { return #expect(Bool(false), "\(answers)") }
            #expect(record.deviceID == id)
        }
    }

    /// A quiet node makes the spares it keeps, and keeps no more; retired files count.
    @Test func aQuietNodeMakesTheSparesItKeeps() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let engine = try open(temp.path, moveBelow: JournalMovePolicy.defaultQuietOperationsPerSecond, spares: 4)
            _ = await register(engine, count: 1_000)
            #expect(try await eventually { CommitJournal.spareNames(inDirectoryAt: temp.path).count == 4 && engine.stats().journalFiles == 1 })
            // Three more quiet looks, each of which tops the spares up when fewer are kept.
            let looks = engine.mover.looks
            #expect(try await eventually { engine.mover.looks >= looks + 3 })
            #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count == 4)
            #expect(engine.stats().journalSpares == 4 && engine.stats().journalSparesKept == 4)
            engine.close()
        }
        // A restart with fewer kept deletes what it retires, and never a spare it has.
        let engine = try open(temp.path, moveBelow: 0, spares: 2)
        defer { engine.close() }
        #expect(CommitJournal.spareNames(inDirectoryAt: temp.path).count == 3, "one became the new file")
        // The stats tell what the directory holds, even above what the node keeps now.
        #expect(engine.stats().journalSpares == 3 && engine.stats().journalSparesKept == 2)
        #expect(engine.stats().deviceCount == 1_000)
    }

    @Test func aNodeSetToZeroKeepsEveryFileForTheNextStartUp() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        do {
            let engine = try open(temp.path, moveBelow: 0)
            // No thread moves anything: what the directory holds after the registrations stays.
            #expect(!engine.mover.movesWhileServing)
            _ = await register(engine, count: 3_000)
            let stats = engine.stats()
            let files = try journalFiles(temp.path)
            #expect(stats.journalFiles > 4 && files.count == Int(stats.journalFiles))
            engine.close()
        }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        #expect(log.recordCount == 0)
    }

    /// A node committing faster than its threshold moves nothing; once it is quiet, it does.
    @Test func aBusyNodeMovesNothingUntilItIsQuiet() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path, moveBelow: 100)
        defer { engine.close() }
        // Well over 100 operations a second (20 every 5 ms or so) for about 1.5 s, from a thread of its own, so that a
        // busy test run cannot hold the load back (and so make the node quiet) for long.
        let loadDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let answered = DispatchSemaphore(value: 0)
            let until = DispatchTime.now().uptimeNanoseconds + 1_500_000_000
            var registered: UInt64 = 0
            while DispatchTime.now().uptimeNanoseconds < until {
                let batch = (registered..<registered + 20).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: 9, low: $0 + 1).text) }
                engine.submit([ClientFrame(requestID: 1, body: .registerBatch(batch))]) { _ in answered.signal() }
                answered.wait()
                registered += 20
                usleep(5_000)
            }
            loadDone.signal()
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                loadDone.wait()
                continuation.resume()
            }
        }
        // Nothing moved: the run's first file is still there, beside every later one.
        let files = try journalFiles(temp.path)
        #expect(files.count > 1 && files.first == "journal-000000000001.log" && files.count == Int(engine.stats().journalFiles))
        #expect(try await eventually { engine.stats().journalFiles == 1 })
    }
}
