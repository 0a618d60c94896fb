import Foundation
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// A peer's snapshot is written only when the data directory keeps room for the journal after
/// it: a transfer may announce up to a TiB, and a full disk stops the journal for good.
@Suite(.timeLimit(.minutes(5))) struct IncomingSnapshotRoomTests {
    /// The outcome of writing `chunk` as a transfer's first, on `engine`'s intake.
    private func firstWrite(_ chunk: SnapshotChunk, on engine: RegistryEngine) async throws -> WireError? {
        let intake = try #require(IncomingSnapshot.begin(engine: engine))
        let outcome = await withCheckedContinuation { continuation in intake.write(chunk) { continuation.resume(returning: $0) } }
        await withCheckedContinuation { continuation in intake.abandon { continuation.resume() } }
        return outcome
    }

    @Test func aSnapshotThatWouldLeaveTooLittleRoomIsRefusedRetryablyAndOneThatFitsIsWritten() async throws {
        let disk = SimulatedFileSystem(capacityBytes: 4 << 20)
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = "/data"
        configuration.nodeID = try NodeID("node-b")
        configuration.journalFileBytes = 256 << 10
        configuration.snapshotEveryOperations = 0
        configuration.snapshotEverySeconds = 0
        let engine = try RegistryEngine(configuration: configuration, logger: .quiet(), wallClock: { 1_800_000_000_000 }, fs: disk)
        defer { engine.close() }
        let free = try disk.availableBytes(in: "/data")
        #expect(engine.snapshots.spareBytes == 512 << 10)

        // Fits, but would leave less than two journal files' room.
        let tooBig = SnapshotChunk(transferID: 1, offset: 0, totalBytes: free - (256 << 10), data: [1, 2, 3])
        let refusal = try #require(try await firstWrite(tooBig, on: engine))
        #expect(refusal.code == .snapshotRefused && refusal.retryable, "\(refusal)")
        #expect(refusal.message.contains("does not fit: the data directory has \(free) bytes free, and keeps 524288 for the journal"), "\(refusal)")
        #expect(try disk.list("/data").contains(Snapshotter.incomingName) == false)

        // Leaves exactly the spare room: written.
        let fits = SnapshotChunk(transferID: 2, offset: 0, totalBytes: free - (512 << 10), data: [1, 2, 3])
        #expect(try await firstWrite(fits, on: engine) == nil)
    }

    /// The simulated disk holds no more than its capacity: a write past it fails as a full
    /// disk's does, and what is free is what the files leave.
    @Test func theSimulatedDiskFillsUp() throws {
        let disk = SimulatedFileSystem(capacityBytes: 100)
        let file = try disk.open("/f", create: true)
        try disk.write(file, [UInt8](repeating: 0, count: 60), at: 0)
        #expect(try disk.availableBytes(in: "/") == 40)
        // Writing over what the file holds needs no room.
        try disk.write(file, [UInt8](repeating: 1, count: 60), at: 0)
        #expect {
            try disk.write(file, [UInt8](repeating: 2, count: 41), at: 60)
        } throws: { error in
            "\(error)".contains("No space left on device")
        }
        try disk.write(file, [UInt8](repeating: 2, count: 40), at: 60)
        #expect(try disk.availableBytes(in: "/") == 0)
        // A file removed still holds its blocks while it is open, and frees them once closed.
        try disk.remove("/f")
        #expect(try disk.availableBytes(in: "/") == 0)
        disk.close(file)
        #expect(try disk.availableBytes(in: "/") == 100)
    }
}
