import RegistryCore
import RegistryStorage
import RegistryTestSupport
import Testing

/// Snapshot files: what is written reads back whole, in order; damage and truncation are refused
/// with a message; a crash while writing leaves the previous snapshot and no half of the new one.
@Suite struct SnapshotFileTests {
    /// `count` records of varied sizes, seeded.
    func records(_ count: Int, seed: UInt64) -> [[UInt8]] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { index in
            (0..<Int(generator.next() % 120)).map { UInt8(truncatingIfNeeded: $0 &+ index) }
        }
    }

    func write(_ records: [[UInt8]], label: UInt64, metadata: [UInt8], on fs: some FileSystem, in directory: String) throws -> String {
        let writer = try SnapshotWriter(fs: fs, directory: directory, label: label, metadata: metadata)
        for record in records { try record.withUnsafeBytes { try writer.append($0) } }
        return try writer.finish()
    }

    func read(_ path: String, on fs: some FileSystem) throws -> (metadata: [UInt8], records: [[UInt8]]) {
        var metadata = [UInt8]()
        var records = [[UInt8]]()
        try SnapshotFile.read(path, on: fs, metadata: { metadata = $0 }, record: { records.append(Array($0)) })
        return (metadata, records)
    }

    @Test func whatIsWrittenReadsBackAcrossBlocksOnBothDisks() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let many = records(40_000, seed: 1)  // about 2.4 MB: three blocks
        for (fs, directory) in [(PosixFileSystem() as any FileSystem, temp.path), (SimulatedFileSystem(), "/data")] {
            let path = try write(many, label: 42, metadata: [1, 2, 3], on: fs, in: directory)
            #expect(path.hasSuffix("/snapshot-00000000000000000042.snap"))
            let back = try read(path, on: fs)
            #expect(back.metadata == [1, 2, 3] && back.records == many)
            let empty = try write([], label: 7, metadata: [], on: fs, in: directory)
            #expect(try read(empty, on: fs).records.isEmpty)
            #expect(try SnapshotFile.labels(in: directory, on: fs) == [42, 7])
        }
    }

    /// Blocks sealed elsewhere (a forked snapshot's child) and records appended one at a time
    /// make the same file as the same records appended one at a time, in whatever order they
    /// mix, so long as each sealed block is cut where the writer would cut it.
    @Test func sealedBlocksMakeTheFileRecordsAppendedOneByOneWould() throws {
        let fs = SimulatedFileSystem()
        let many = records(40_000, seed: 3)
        let byRecord = try fs.readAll(try write(many, label: 1, metadata: [4], on: fs, in: "/data"))
        // The same records cut into blocks as the writer cuts them; the first block's records
        // appended one by one, the others sealed.
        var blocks = [[[UInt8]]]()
        var block = SnapshotBlock()
        var current = [[UInt8]]()
        for record in many {
            block.append(record)
            current.append(record)
            if block.isFull {
                blocks.append(current)
                current = []
                block.reset()
            }
        }
        blocks.append(current)
        #expect(blocks.count == 3)
        let writer = try SnapshotWriter(fs: fs, directory: "/data", label: 2, metadata: [4])
        for record in blocks[0] { try record.withUnsafeBytes { try writer.append($0) } }
        for records in blocks.dropFirst() {
            var sealed = SnapshotBlock()
            for record in records { sealed.append(record) }
            sealed.seal()
            try sealed.bytes.withUnsafeBytes { try writer.appendSealed($0) }
        }
        let bySealed = try fs.readAll(try writer.finish())
        #expect(bySealed == byRecord)
    }

    /// Records written in place (``SnapshotBlock/append(recordBytes:writing:)``) make the block
    /// that the same records copied in make, also past the room the block keeps (a record bigger
    /// than a whole block) and after a reset, whose head is blank again until sealed.
    @Test func recordsWrittenInPlaceMakeTheBlockCopiedRecordsMake() throws {
        var generator = SplitMix64(seed: 11)
        let huge = (0..<(SnapshotFile.blockBytes + (100 << 10))).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var copied = SnapshotBlock()
        var inPlace = SnapshotBlock()
        for round in 0..<2 {
            var expected = [UInt8](repeating: 0, count: SnapshotFile.blockHeaderBytes)
            var batch = records(500, seed: generator.next()) + [[], huge]
            if round == 1 { batch.swapAt(3, batch.count - 1) }
            for record in batch {
                copied.append(record)
                inPlace.append(recordBytes: record.count) { target in
                    record.withUnsafeBytes { target.copyMemory(from: $0.baseAddress!, byteCount: record.count) }
                }
                expected += withUnsafeBytes(of: UInt32(record.count).littleEndian, Array.init) + record
            }
            #expect(inPlace.bytes == expected)
            #expect(inPlace.byteCount == expected.count && inPlace.records == UInt32(batch.count))
            #expect(inPlace.seal() == copied.seal())
            #expect(inPlace.bytes == copied.bytes)
            #expect(inPlace.bytes.prefix(SnapshotFile.blockHeaderBytes) != expected.prefix(SnapshotFile.blockHeaderBytes))
            #expect(inPlace.withUnsafeBytes { Array($0) } == inPlace.bytes)
            copied.reset()
            inPlace.reset()
            #expect(inPlace.bytes == [UInt8](repeating: 0, count: SnapshotFile.blockHeaderBytes) && inPlace.isEmpty)
        }
    }

    /// A sealed block whose head does not announce exactly its bytes is refused, and what was
    /// written before it still makes a whole file.
    @Test func aSealedBlockWithAWrongHeadIsRefused() throws {
        let fs = SimulatedFileSystem()
        let writer = try SnapshotWriter(fs: fs, directory: "/data", label: 1, metadata: [])
        var block = SnapshotBlock()
        block.append([1, 2, 3])
        block.seal()
        for wrong in [Array(block.bytes.dropLast()), block.bytes + [0], [UInt8](repeating: 0, count: block.bytes.count), []] {
            #expect(throws: StorageError.self) { try wrong.withUnsafeBytes { try writer.appendSealed($0) } }
        }
        try block.bytes.withUnsafeBytes { try writer.appendSealed($0) }
        #expect(try read(try writer.finish(), on: fs).records == [[1, 2, 3]])
    }

    @Test func aTruncatedSnapshotIsRefusedAtEveryLength() throws {
        let fs = SimulatedFileSystem()
        let path = try write(records(300, seed: 2), label: 1, metadata: [9], on: fs, in: "/data")
        let whole = try fs.readAll(path)
        for length in stride(from: 0, to: whole.count, by: max(1, whole.count / 200)) {
            try fs.replace("/data/cut.snap", with: Array(whole.prefix(length)), inDirectory: "/data")
            #expect(throws: StorageError.self, "cut at \(length) of \(whole.count)") { _ = try read("/data/cut.snap", on: fs) }
        }
    }

    @Test(arguments: Array(1...40) as [UInt64])
    func aFlippedByteAnywhereIsRefused(seed: UInt64) throws {
        let fs = SimulatedFileSystem()
        let path = try write(records(200, seed: seed), label: 1, metadata: [5, 6], on: fs, in: "/data")
        var bytes = try fs.readAll(path)
        var generator = SplitMix64(seed: seed)
        let index = Int(generator.next() % UInt64(bytes.count))
        bytes[index] ^= UInt8(1 + generator.next() % 255)
        try fs.replace(path, with: bytes, inDirectory: "/data")
        #expect {
            _ = try read(path, on: fs)
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.hasPrefix("snapshot \(path):")
        }
    }

    /// A crash at any point of writing snapshot 2 leaves snapshot 1 readable, and snapshot 2
    /// either absent or whole.
    @Test func aCrashWhileWritingLeavesThePreviousSnapshotAndNoHalfOfTheNext() throws {
        let first = records(500, seed: 3)
        let second = records(30_000, seed: 4)
        for crashAfter in 0..<12 {
            let disk = SimulatedFileSystem()
            _ = try write(first, label: 1, metadata: [1], on: disk, in: "/data")
            let fs = CrashingFileSystem(disk, failingAfter: crashAfter)
            _ = try? write(second, label: 2, metadata: [2], on: fs, in: "/data")
            var random: SplitMix64? = SplitMix64(seed: UInt64(crashAfter))
            disk.crash(tearing: &random)
            let labels = try SnapshotFile.labels(in: "/data", on: disk)
            #expect(labels.contains(1))
            #expect(try read("/data/" + SnapshotFile.name(label: 1), on: disk).records == first)
            if labels.contains(2) {
                #expect(try read("/data/" + SnapshotFile.name(label: 2), on: disk).records == second, "crash after \(crashAfter)")
            }
        }
    }
}
