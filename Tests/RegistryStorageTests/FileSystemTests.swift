import RegistryCore
import RegistryStorage
import RegistryTestSupport
import Testing

/// The storage interface: the same contract on the real disk and on the simulated one, and the
/// simulated disk's crashes.
@Suite struct FileSystemTests {
    /// The calls every file system must answer alike.
    func exerciseContract(_ fs: some FileSystem, in directory: String) throws {
        let path = directory + "/a.bin"
        let file = try fs.open(path, create: true)
        try fs.write(file, [1, 2, 3, 4], at: 0)
        try fs.write(file, [9, 9], at: 6)
        #expect(try fs.size(file) == 8)
        #expect(try fs.read(file, at: 0, count: 100) == [1, 2, 3, 4, 0, 0, 9, 9], "a hole reads as zeros")
        #expect(try fs.read(file, at: 3, count: 2) == [4, 0])
        #expect(try fs.read(file, at: 20, count: 2) == [])
        try fs.sync(file)
        fs.close(file)
        #expect(try fs.list(directory).contains("a.bin"))
        try fs.rename(path, to: directory + "/b.bin")
        #expect(try fs.list(directory).filter { $0.hasSuffix(".bin") }.sorted() == ["b.bin"])
        #expect(try fs.readAll(directory + "/b.bin") == [1, 2, 3, 4, 0, 0, 9, 9])
        var buffer: [UInt8] = [5, 5]
        #expect(try fs.readAll(directory + "/b.bin", reusing: &buffer) == 8, "a buffer smaller than the file grows")
        #expect(Array(buffer[..<8]) == [1, 2, 3, 4, 0, 0, 9, 9])
        var into = [UInt8](repeating: 0xEE, count: 4)
        let reopened = try fs.open(directory + "/b.bin", create: false)
        #expect(try into.withUnsafeMutableBytes { try fs.read(reopened, at: 5, into: $0) } == 3)
        fs.close(reopened)
        #expect(into == [0, 9, 9, 0xEE], "fewer bytes only at the end of the file")
        try fs.replace(directory + "/b.bin", with: [7], inDirectory: directory)
        #expect(try fs.readAll(directory + "/b.bin") == [7])
        #expect(try fs.readAll(directory + "/b.bin", reusing: &buffer) == 1, "a bigger buffer is reused")
        #expect(buffer.count == 8 && buffer[0] == 7)
        try fs.remove(directory + "/b.bin")
        try fs.remove(directory + "/b.bin")  // a missing file is no error
        #expect(throws: StorageError.self) { try fs.open(directory + "/b.bin", create: false) }
        try fs.syncDirectory(directory)
    }

    @Test func theRealDiskKeepsTheContract() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        try exerciseContract(PosixFileSystem(), in: temp.path)
    }

    @Test func theSimulatedDiskKeepsTheContract() throws {
        try exerciseContract(SimulatedFileSystem(), in: "/data")
    }

    @Test func aCrashLosesWhatWasNotSynced() throws {
        let fs = SimulatedFileSystem()
        let file = try fs.open("/data/log", create: true)
        try fs.write(file, [1, 2, 3], at: 0)
        try fs.sync(file)
        try fs.syncDirectory("/data")
        try fs.write(file, [4, 5], at: 3)
        #expect(try fs.read(file, at: 0, count: 10) == [1, 2, 3, 4, 5])
        fs.crash()
        #expect(throws: StorageError.self) { try fs.read(file, at: 0, count: 1) }  // handles die with the process
        #expect(try fs.readAll("/data/log") == [1, 2, 3])
    }

    @Test func aCrashUndoesNamesTheDirectoryDidNotSync() throws {
        let fs = SimulatedFileSystem()
        let kept = try fs.open("/data/kept", create: true)
        try fs.sync(kept)
        try fs.syncDirectory("/data")
        let lost = try fs.open("/data/lost", create: true)
        try fs.write(lost, [1], at: 0)
        try fs.sync(lost)  // its bytes are durable, its name is not
        try fs.rename("/data/kept", to: "/data/renamed")
        fs.crash()
        #expect(try fs.list("/data") == ["kept"])
    }

    /// A crash at every point of `replace` leaves the old contents or the new, whole.
    @Test func replacingAFileIsAtomicAtEveryCrashPoint() throws {
        for crashAfter in 0..<8 {
            let fs = CrashingFileSystem(SimulatedFileSystem(), failingAfter: 1_000)
            try fs.replace("/data/meta", with: [1, 1, 1], inDirectory: "/data")
            fs.failingAfter = crashAfter
            try? fs.replace("/data/meta", with: [2, 2, 2, 2], inDirectory: "/data")
            fs.inner.crash()
            let after = try fs.inner.readAll("/data/meta")
            #expect(after == [1, 1, 1] || after == [2, 2, 2, 2], "crash after \(crashAfter) calls left \(after)")
        }
    }

    /// A tearing crash keeps a prefix of the unsynced writes, the last possibly cut: never a
    /// later write without the earlier ones, never bytes that were not written.
    @Test(arguments: Array(1...50) as [UInt64])
    func aTearingCrashKeepsAPrefixOfTheUnsyncedWrites(seed: UInt64) throws {
        let fs = SimulatedFileSystem()
        let file = try fs.open("/data/journal", create: true)
        try fs.write(file, [0xAA], at: 0)
        try fs.sync(file)
        try fs.syncDirectory("/data")
        for index in 1...5 { try fs.write(file, [UInt8](repeating: UInt8(index), count: 4), at: 1 + 4 * (index - 1)) }
        var random: SplitMix64? = SplitMix64(seed: seed)
        fs.crash(tearing: &random)
        let kept = try fs.readAll("/data/journal")
        let written: [UInt8] = [0xAA] + (1...5).flatMap { [UInt8](repeating: UInt8($0), count: 4) }
        #expect(kept.count >= 1 && Array(written.prefix(kept.count)) == kept, "kept \(kept)")
    }
}
