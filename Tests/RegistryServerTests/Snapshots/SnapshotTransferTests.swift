import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Sending a snapshot file in chunks, both sides as plain values: the sender's window and
/// acknowledgements, the receiver's order checks, and the link pausing batches meanwhile.
@Suite struct SnapshotTransferTests {
    let own = NodeID(trusted: "node-a")

    func chunk(_ transfer: UInt64 = 1, at offset: UInt64, _ count: Int, of total: UInt64) -> SnapshotChunk {
        SnapshotChunk(transferID: transfer, offset: offset, totalBytes: total, data: [UInt8](repeating: 7, count: count))
    }

    @Test func theSenderKeepsAWindowOfChunksAndFinishesWhenTheReceiverInstalls() throws {
        var sending = SnapshotSending(transferID: 3, totalBytes: 10, chunkBytes: 3, window: 2)
        #expect(sending.nextChunk()! == (0, 3))
        #expect(sending.nextChunk()! == (3, 3))
        #expect(sending.nextChunk() == nil, "the window is full")
        #expect(try !sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 3)))
        #expect(sending.nextChunk()! == (6, 3))
        #expect(try !sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 9)))
        #expect(sending.nextChunk()! == (9, 1), "the last chunk is what is left")
        #expect(sending.nextChunk() == nil)
        #expect(try !sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 10)))
        #expect(sending.awaitingInstall)
        #expect(try sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 10, installed: true)))
    }

    @Test func theSenderRefusesAcknowledgementsThatDoNotFitWhatItSent() {
        var sending = SnapshotSending(transferID: 3, totalBytes: 10, chunkBytes: 4, window: 2)
        _ = sending.nextChunk()
        #expect(throws: SnapshotSending.Violation.self) { try sending.acknowledged(SnapshotAck(transferID: 4, receivedBytes: 4)) }
        #expect(throws: SnapshotSending.Violation.self) { try sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 8)) }
        #expect(throws: SnapshotSending.Violation.self) {
            try sending.acknowledged(SnapshotAck(transferID: 3, receivedBytes: 4, installed: true))
        }
    }

    @Test func theReceiverTakesChunksInOrderOnlyAndSaysWhichIsLast() throws {
        var reception = try SnapshotReception(first: chunk(at: 0, 4, of: 10))
        #expect(try !reception.accept(chunk(at: 0, 4, of: 10)))
        #expect(throws: WireError.self) { try reception.accept(chunk(at: 0, 4, of: 10)) }
        #expect(throws: WireError.self) { try reception.accept(chunk(at: 5, 4, of: 10)) }
        #expect(throws: WireError.self) { try reception.accept(chunk(2, at: 4, 4, of: 10)) }
        #expect(throws: WireError.self) { try reception.accept(chunk(at: 4, 4, of: 11)) }
        #expect(throws: WireError.self) { try reception.accept(chunk(at: 4, 7, of: 10)) }
        #expect(throws: WireError.self) { try reception.accept(chunk(at: 4, 0, of: 10)) }
        #expect(try !reception.accept(chunk(at: 4, 4, of: 10)))
        #expect(try reception.accept(chunk(at: 8, 2, of: 10)))
        #expect(throws: WireError.self) { try SnapshotReception(first: chunk(at: 3, 4, of: 10)) }
        #expect(throws: WireError.self) { try SnapshotReception(first: chunk(at: 0, 4, of: 0)) }
        #expect(throws: WireError.self) { try SnapshotReception(first: chunk(at: 0, 4, of: SnapshotReception.maxBytes + 1)) }
    }

    @Test func theSessionStoresChunksAndRefusesOneOutOfOrder() {
        let identity = PeerIdentity(clusterID: "c", nodeID: NodeID(trusted: "node-b"), epoch: 1, mintingKeyFingerprint: 0)
        var session = PeerSessionStateMachine(identity: identity, maxBatchOperations: 10)
        #expect(session.received(.snapshotChunk(chunk(at: 0, 4, of: 8))) == .refuse(WireError(code: .handshakeRequired, message: "the first peer frame must be a PeerHello")))
        session = PeerSessionStateMachine(identity: identity, maxBatchOperations: 10)
        _ = session.received(.hello(identity.hello(holding: VersionVector()).withNode("node-a")))
        #expect(session.received(.snapshotChunk(chunk(at: 0, 4, of: 8))) == .storeChunk(chunk(at: 0, 4, of: 8), starts: true, last: false))
        #expect(session.received(.snapshotChunk(chunk(at: 4, 4, of: 8))) == .storeChunk(chunk(at: 4, 4, of: 8), starts: false, last: true))
        #expect(session.reception == nil)
        guard case .refuse(let error) = session.received(.snapshotChunk(chunk(at: 4, 4, of: 8))) else {
            Issue.record("a chunk that starts nowhere must be refused")
            return
        }
        #expect(error.code == .unexpectedPeerFrame && session.state == .closed)
    }

    func streamingLink() -> PeerLinkStateMachine {
        var random = SplitMix64(seed: 1)
        var machine = PeerLinkStateMachine.awaitingWelcome(answerTimeoutMillis: 1_000, installTimeoutMillis: 60_000, random: &random)
        _ = machine.received(machine.signed(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)), nowMillis: 0, random: &random)
        return machine
    }

    /// A peer whose frames are small gets chunks that fit them: a chunk built for the default
    /// size would be refused as too large every time it was sent.
    @Test func chunksFitThePeersFrameLimit() throws {
        var random = SplitMix64(seed: 1)
        var machine = PeerLinkStateMachine.awaitingWelcome(
            limits: Limits(maxFrameBytes: 4_096, maxBatchSize: 10, maxInFlight: 10), random: &random)
        _ = machine.received(machine.signed(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)), nowMillis: 0, random: &random)
        #expect(machine.peerFrameBytes == 4_096)
        let started = machine.startSnapshot(totalBytes: 10_000, nowMillis: 0)
        let transfer = try #require(started)
        let chunk = 4_096 - PeerLinkStateMachine.frameOverheadBytes
        #expect(machine.nextSnapshotChunk(nowMillis: 0)! == (transfer, 0, chunk))
        #expect(machine.nextSnapshotChunk(nowMillis: 0)! == (transfer, UInt64(chunk), chunk))
    }

    @Test func theLinkSendsNoBatchDuringATransferAndLearnsWhatTheReceiverHoldsAfterIt() throws {
        var random = SplitMix64(seed: 1)
        var machine = streamingLink()
        let log = LogID(origin: own, epoch: 1)
        var local = VersionVector()
        local.recordAll(through: 100, in: log)
        #expect(machine.nextRun(local: local, nowMillis: 0) == ReplicationCursor.Run(log: log, from: 1, through: 100))
        let started = machine.startSnapshot(totalBytes: 600 << 10, nowMillis: 0)
        let transfer = try #require(started)
        #expect(machine.nextRun(local: local, nowMillis: 0) == nil, "no batch while the snapshot goes")
        #expect(machine.nextSnapshotChunk(nowMillis: 0)! == (transfer, 0, 256 << 10))
        #expect(machine.nextSnapshotChunk(nowMillis: 0)! == (transfer, 256 << 10, 256 << 10))
        #expect(machine.nextSnapshotChunk(nowMillis: 0)! == (transfer, 512 << 10, 88 << 10))
        #expect(machine.nextSnapshotChunk(nowMillis: 0) == nil)
        #expect(machine.received(.snapshotAck(SnapshotAck(transferID: transfer, receivedBytes: 600 << 10)), nowMillis: 500, random: &random) == .stream)
        // Writing is done; installing may take long, up to the install timeout.
        #expect(machine.tick(nowMillis: 30_000, random: &random) == .none)
        let held = [LogPosition(origin: "node-a", epoch: 1, sequence: 90)]
        let installed = SnapshotAck(transferID: transfer, receivedBytes: 600 << 10, installed: true, held: held)
        #expect(machine.received(.snapshotAck(installed), nowMillis: 31_000, random: &random) == .stream)
        #expect(machine.transfer == nil)
        #expect(machine.nextRun(local: local, nowMillis: 31_000) == ReplicationCursor.Run(log: log, from: 91, through: 100), "the tail past the snapshot")
    }

    @Test func aTransferThatStopsProgressingEndsTheConnection() {
        var random = SplitMix64(seed: 1)
        var machine = streamingLink()
        #expect(machine.startSnapshot(totalBytes: 1_000, nowMillis: 0) != nil)
        _ = machine.nextSnapshotChunk(nowMillis: 0)
        #expect(machine.tick(nowMillis: 900, random: &random) == .none)
        guard case .closeAndRetry = machine.tick(nowMillis: 1_000, random: &random) else {
            Issue.record("an unacknowledged chunk must time out")
            return
        }
        #expect(machine.transfer == nil)
    }
}

extension PeerHello {
}
