import Foundation
import NIOCore
import NIOEmbedded
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// The receiving side of a peer connection holds the channel's reads while it has as many batches
/// waiting for the engine as it takes (``PeerConnectionHandler/maxBatchesInFlight``), so that a
/// fast sender is held back by TCP, and reads again once they are acknowledged. The engine is
/// real; its disk holds the first commit's sync, so the batches stay in flight for as long as
/// the test needs.
@Suite(.serialized, .timeLimit(.minutes(5))) struct PeerBackpressureTests {
    static func configuration(_ path: String, node: String) throws -> NodeConfiguration {
        try .withoutSnapshots(path, node: node)
    }

    /// Six batches of the sender's own log, twenty registrations each, as peer frames.
    static func batches(from sender: RegistryEngine) async throws -> ByteBuffer {
        for batch in 0..<6 {
            let requests = (0..<20).map { RegisterRequest(bundleID: "com.v.a", idfv: UUID128(high: UInt64(batch) + 1, low: UInt64($0) + 1).text) }
            let frame = ClientFrame(requestID: 1, body: .registerBatch(requests))
            _ = await withCheckedContinuation { continuation in sender.submit([frame]) { continuation.resume(returning: $0.count) } }
        }
        let records = try sender.logReader(for: sender.peerIdentity.ownLog, from: 1).nextRecords(atMost: 1_000)
        try #require(records.count == 120)
        var buffer = ByteBuffer()
        for batch in 0..<6 {
            let operations = records[batch * 20..<(batch + 1) * 20].map {
                PeerOperation(origin: $0.origin, epoch: $0.epoch, sequence: $0.sequence, hlc: $0.hlc, operation: $0.payload)
            }
            try PeerFrame.batch(OperationBatch(batchID: UInt64(batch) + 1, operations: Array(operations))).encodeFrame(into: &buffer)
        }
        return buffer
    }

    /// The acknowledgements written so far, waiting up to `seconds` (of this task's turns,
    /// ``poll(upTo:every:until:)``) for `count` of them.
    static func acknowledgements(on channel: NIOAsyncTestingChannel, count: Int, seconds: Int) async throws -> [BatchAck] {
        var reader = FrameReader(maxFrameBytes: 1 << 20)
        var acks = [BatchAck]()
        _ = try await poll(upTo: .seconds(seconds)) {
            while var bytes = try await channel.readOutbound(as: ByteBuffer.self) {
                reader.append(&bytes)
                while let payload = try reader.next() {
                    if case .ack(let ack) = try PeerFrame(decoding: payload) { acks.append(ack) }
                }
            }
            return acks.count >= count
        }
        return acks
    }

    @Test func readsAreHeldWhileFourBatchesWaitForTheDiskAndResumeOnceTheyAreAcknowledged() async throws {
        let dirA = try TemporaryDirectory()
        let dirB = try TemporaryDirectory()
        defer {
            dirA.remove()
            dirB.remove()
        }
        let disk = GatedFileSystem(holdingRenamesTo: nil)
        let receiver = try RegistryEngine(configuration: Self.configuration(dirA.path, node: "node-a"), logger: .quiet(), fs: disk)
        let sender = try RegistryEngine(configuration: Self.configuration(dirB.path, node: "node-b"), logger: .quiet())
        defer {
            sender.close()
            receiver.close()
        }
        let frames = try await Self.batches(from: sender)
        var hello = ByteBuffer()
        let challenge: UInt64 = 99
        try PeerFrame.hello(sender.peerIdentity.hello(holding: VersionVector(), challenge: challenge, ownChallenge: 5)).encodeFrame(into: &hello)

        let channel = NIOAsyncTestingChannel()
        let counter = ReadCounter()
        try await channel.testingEventLoop.executeInContext { [hello] in
            try channel.pipeline.syncOperations.addHandler(counter)
            try channel.pipeline.syncOperations.addHandler(
                PeerConnectionHandler(engine: receiver, logger: .quiet(), alreadyRead: hello, challenge: challenge))
        }
        #expect(counter.reads.load(ordering: .relaxed) == 1, "the handler reads once it takes over the connection")

        disk.holdNextSync()
        try await channel.writeInbound(frames)
        guard await disk.waitUntilReached() else {
            Issue.record("the held call was never reached")
            return
        }
        try await channel.testingEventLoop.executeInContext { channel.pipeline.read() }
        #expect(counter.reads.load(ordering: .relaxed) == 1, "four batches wait for the disk: the read is held")
        #expect(receiver.durableVector[sender.peerIdentity.ownLog] == 0)

        disk.open()
        let acks = try await Self.acknowledgements(on: channel, count: 6, seconds: 20)
        #expect(acks.map(\.batchID) == [1, 2, 3, 4, 5, 6])
        let held = try VersionVector(positions: try #require(acks.last).held)
        #expect(held[sender.peerIdentity.ownLog] == 120)
        #expect(receiver.durableVector[sender.peerIdentity.ownLog] == 120)
        #expect(counter.reads.load(ordering: .relaxed) == 2, "the held read goes once batches are acknowledged")
        _ = try await channel.finish(acceptAlreadyClosed: true)
    }

    /// A peer that refuses (here before its hello) ends the connection: before, the session was
    /// marked closed and the connection kept reading, buffering whatever came next without bound.
    @Test func aPeersRefusalClosesTheConnection() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let receiver = try RegistryEngine(configuration: Self.configuration(dir.path, node: "node-a"), logger: .quiet())
        defer { receiver.close() }
        let channel = NIOAsyncTestingChannel()
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(
                PeerConnectionHandler(engine: receiver, logger: .quiet(), alreadyRead: ByteBuffer(), challenge: 1))
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7400))
        #expect(channel.isActive)
        var refusal = ByteBuffer()
        try PeerFrame.refusal(WireError(code: .invalidArgument, message: "no")).encodeFrame(into: &refusal)
        try await channel.writeInbound(refusal)
        #expect(!channel.isActive, "the peer's refusal must close the connection")
        _ = try await channel.finish(acceptAlreadyClosed: true)
    }
}
