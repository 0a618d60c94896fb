import Foundation
import Platform
import RegistryCore
@testable import RegistryStorage
import RegistryTestSupport
import Synchronization
import Testing

/// ``ChunkedFileWriter`` and the handles it writes through: what is appended, in pieces of any
/// size, is the file after ``ChunkedFileWriter/finish()``, on the real disk (past the page cache
/// where it allows) and on the simulated one, whose crashes keep nothing that was not synced.
@Suite struct ChunkedFileWriterTests {
    /// Totals around the alignment and the chunk's size, the pieces cut at random (seeded).
    static let totals = [
        0, 1, 4095, 4096, 4097, ChunkedFileWriter.chunkBytes - 1, ChunkedFileWriter.chunkBytes,
        ChunkedFileWriter.chunkBytes + 1, 3 * ChunkedFileWriter.chunkBytes + 17,
    ]

    /// `total` bytes of a seeded pattern, and the piece sizes to append them in.
    static func pieces(total: Int, seed: UInt64) -> (bytes: [UInt8], sizes: [Int]) {
        var random = SplitMix64(seed: seed)
        var bytes = [UInt8](repeating: 0, count: total)
        bytes.withUnsafeMutableBytes { raw in
            for word in stride(from: 0, to: total, by: 8) {
                withUnsafeBytes(of: random.next()) { raw[word..<min(word + 8, total)].copyBytes(from: $0.prefix(total - word)) }
            }
        }
        var sizes = [Int]()
        var left = total
        while left > 0 {
            // Mostly small records, now and then a piece bigger than a chunk.
            let size = Int.random(in: 0..<10, using: &random) == 0
                ? Int.random(in: 1...(2 * ChunkedFileWriter.chunkBytes), using: &random) : Int.random(in: 1...5000, using: &random)
            sizes.append(min(size, left))
            left -= sizes.last!
        }
        return (bytes, sizes)
    }

    static func write(_ bytes: [UInt8], in sizes: [Int], to writer: ChunkedFileWriter) throws {
        var start = 0
        for size in sizes {
            try bytes.withUnsafeBytes { try writer.append(UnsafeRawBufferPointer(rebasing: $0[start..<(start + size)])) }
            start += size
            #expect(writer.bytesWritten == start)
        }
    }

    @Test(arguments: totals)
    func theRealDiskHoldsWhatWasAppended(total: Int) throws {
        try Self.onTheRealDisk { fs, file in
            let (bytes, sizes) = Self.pieces(total: total, seed: UInt64(total) &+ 7)
            let writer = ChunkedFileWriter(fs: fs, file: file)
            try Self.write(bytes, in: sizes, to: writer)
            try writer.finish()
            #expect(try fs.readAll(file.path) == bytes)
        }
    }

    /// Calls `body` with a new file opened by ``PosixFileSystem/openBypassingCache(_:)`` in a
    /// directory of its own under the system's temporary directory, both gone afterwards.
    static func onTheRealDisk(_ body: (PosixFileSystem, RegistryStorage.FileHandle) throws -> Void) throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let fs = PosixFileSystem()
        let file = try fs.openBypassingCache(temp.path + "/chunked.bin")
        defer { fs.close(file) }
        try body(fs, file)
    }

    /// Where the disk allows it (ext4 and xfs do), whole chunks are written with O_DIRECT, and the
    /// last, partial one turns it off: the flag the kernel reports for the descriptor says so.
    @Test func wholeChunksGoPastThePageCacheAndTheTailThroughIt() throws {
        try Self.onTheRealDisk { fs, file in
            guard fs.isBypassingCache(file) else {
                // tmpfs before Linux 6.6, or another file system without O_DIRECT: plain writes.
                #expect(try Self.descriptorFlags(file) & UncachedFiles.openFlag == 0)
                return
            }
            let writer = ChunkedFileWriter(fs: fs, file: file)
            let (bytes, sizes) = Self.pieces(total: 2 * ChunkedFileWriter.chunkBytes + 100, seed: 3)
            try Self.write(bytes, in: sizes, to: writer)
            #expect(try Self.descriptorFlags(file) & UncachedFiles.openFlag != 0, "two whole chunks were written past the cache")
            #expect(fs.isBypassingCache(file))
            try writer.finish()
            #expect(try Self.descriptorFlags(file) & UncachedFiles.openFlag == 0, "the last 100 bytes went through it")
            #expect(!fs.isBypassingCache(file))
            #expect(try fs.readAll(file.path) == bytes)
        }
    }

    /// The open file's flags, as /proc/self/fdinfo reports them (octal).
    static func descriptorFlags(_ file: RegistryStorage.FileHandle) throws -> Int {
        let info = try String(contentsOfFile: "/proc/self/fdinfo/\(file.number)", encoding: .utf8)
        let line = try #require(info.split(separator: "\n").first { $0.hasPrefix("flags:") })
        return try #require(Int(line.dropFirst("flags:".count).trimmingCharacters(in: .whitespaces), radix: 8))
    }

    @Test func aWriteOutOfAlignmentIsMadeThroughTheCache() throws {
        try Self.onTheRealDisk { fs, file in
            try fs.write(file, [1, 2, 3], at: 5)
            #expect(try fs.read(file, at: 0, count: 10) == [0, 0, 0, 0, 0, 1, 2, 3])
            #expect(try Self.descriptorFlags(file) & UncachedFiles.openFlag == 0)
        }
    }

    /// Nothing is durable before ``ChunkedFileWriter/finish()``, everything after; a file written
    /// through the cache (the simulated disk's handles do not bypass it) is synced every
    /// ``ChunkedFileWriter/syncEveryBytes`` meanwhile.
    @Test func onlyFinishMakesItDurableAndTheCachedFileIsSyncedAsItGrows() throws {
        let fs = SimulatedFileSystem()
        let file = try fs.openBypassingCache("/data/chunked.bin")
        try fs.syncDirectory("/data")
        #expect(!fs.isBypassingCache(file))
        let writer = ChunkedFileWriter(fs: fs, file: file)
        let (bytes, sizes) = Self.pieces(total: ChunkedFileWriter.syncEveryBytes + 3 * ChunkedFileWriter.chunkBytes + 5, seed: 11)
        let syncsBefore = fs.syncCount
        try Self.write(bytes, in: sizes, to: writer)
        #expect(fs.syncCount == syncsBefore + 1, "one sync after the first \(ChunkedFileWriter.syncEveryBytes) bytes")
        try writer.finish()
        #expect(try fs.readAll("/data/chunked.bin") == bytes)
        fs.close(file)
        fs.crash()
        #expect(try fs.readAll("/data/chunked.bin") == bytes, "finish synced it")

        let unfinished = try fs.openBypassingCache("/data/unfinished.bin")
        try fs.syncDirectory("/data")
        let cut = ChunkedFileWriter(fs: fs, file: unfinished)
        try Self.write(Array(bytes.prefix(2 * ChunkedFileWriter.chunkBytes)), in: [2 * ChunkedFileWriter.chunkBytes], to: cut)
        fs.crash()
        #expect(try fs.readAll("/data/unfinished.bin") == [], "nothing was synced before the crash")
    }

    /// Every write the writer makes is one whole chunk, from aligned memory at an aligned offset,
    /// but the last; past the cache it syncs only at the end, and once the file system stops
    /// taking writes past the cache (here: at the third chunk), every 8 MiB again.
    @Test(arguments: [nil, 2] as [Int?])
    func writesAreWholeAlignedChunksAndSyncsFollowTheCache(bypassEndsAfter chunks: Int?) throws {
        let fs = RecordingFileSystem(SimulatedFileSystem(), bypassingForWrites: chunks ?? .max)
        let file = try fs.openBypassingCache("/data/recorded.bin")
        let writer = ChunkedFileWriter(fs: fs, file: file)
        let total = 2 * ChunkedFileWriter.syncEveryBytes + 5 * ChunkedFileWriter.chunkBytes + 321
        let (bytes, sizes) = Self.pieces(total: total, seed: 5)
        try Self.write(bytes, in: sizes, to: writer)
        try writer.finish()
        #expect(try fs.readAll("/data/recorded.bin") == bytes)
        let events = fs.events
        let writes = events.compactMap { if case .write(let write) = $0 { write } else { nil } }
        #expect(writes.count == total / ChunkedFileWriter.chunkBytes + 1)
        for (index, write) in writes.enumerated() {
            #expect(write.offset == index * ChunkedFileWriter.chunkBytes)
            #expect(write.address % UncachedFiles.alignment == 0)
            #expect(write.count == (index == writes.count - 1 ? total % ChunkedFileWriter.chunkBytes : ChunkedFileWriter.chunkBytes))
        }
        // Syncs between writes: none past the cache; every 8 MiB written through it.
        let throughCache = total - min(chunks ?? .max, writes.count) * ChunkedFileWriter.chunkBytes
        let expectedSyncs = chunks == nil ? 1 : (throughCache - total % ChunkedFileWriter.chunkBytes) / ChunkedFileWriter.syncEveryBytes + 1
        #expect(events.filter { $0 == .sync }.count == expectedSyncs)
        #expect(events.last == .sync, "finish syncs last")
    }
}

/// A file system that records the writes and syncs made through it, and says its handles bypass
/// the cache until a write after the first `bypassingForWrites` (as Linux's O_DIRECT on a file
/// system that refuses it at that write, which is then made through the cache, as every one
/// after it). The writes go to the inner file system as they came.
final class RecordingFileSystem: FileSystem {
    enum Event: Equatable {
        case write(Write)
        case sync
    }
    struct Write: Equatable {
        let address: Int
        let offset: Int
        let count: Int
    }

    let inner: SimulatedFileSystem
    private let bypassingForWrites: Int
    private let log = Mutex([Event]())

    init(_ inner: SimulatedFileSystem, bypassingForWrites: Int) {
        self.inner = inner
        self.bypassingForWrites = bypassingForWrites
    }

    var events: [Event] { log.withLock { $0 } }

    func open(_ path: String, create: Bool) throws(StorageError) -> RegistryStorage.FileHandle { try inner.open(path, create: create) }
    func openBypassingCache(_ path: String) throws(StorageError) -> RegistryStorage.FileHandle { try inner.openBypassingCache(path) }
    func isBypassingCache(_ file: RegistryStorage.FileHandle) -> Bool {
        log.withLock { $0.count(where: { if case .write = $0 { true } else { false } }) } <= bypassingForWrites
    }
    func write(_ file: RegistryStorage.FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
        log.withLock { $0.append(.write(Write(address: Int(bitPattern: bytes.baseAddress), offset: offset, count: bytes.count))) }
        try inner.write(file, bytes, at: offset)
    }
    func read(_ file: RegistryStorage.FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        try inner.read(file, at: offset, count: count)
    }
    func read(_ file: RegistryStorage.FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int {
        try inner.read(file, at: offset, into: buffer)
    }
    func size(_ file: RegistryStorage.FileHandle) throws(StorageError) -> Int { try inner.size(file) }
    func sync(_ file: RegistryStorage.FileHandle) throws(StorageError) {
        log.withLock { $0.append(.sync) }
        try inner.sync(file)
    }
    func close(_ file: RegistryStorage.FileHandle) { inner.close(file) }
    func rename(_ source: String, to destination: String) throws(StorageError) { try inner.rename(source, to: destination) }
    func remove(_ path: String) throws(StorageError) { try inner.remove(path) }
    func list(_ directory: String) throws(StorageError) -> [String] { try inner.list(directory) }
    func syncDirectory(_ directory: String) throws(StorageError) { try inner.syncDirectory(directory) }
    func availableBytes(in directory: String) throws(StorageError) -> UInt64 { try inner.availableBytes(in: directory) }
}
