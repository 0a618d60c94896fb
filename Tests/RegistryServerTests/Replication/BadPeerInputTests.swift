import Platform
import NIOCore
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Bad peer input over real sockets: each is refused with its typed error, nothing of it is
/// applied, the connection closes, and acknowledged data and other connections carry on.
@Suite(.serialized, .timeLimit(.minutes(5))) struct BadPeerInputTests {
    func hello(cluster: String = "default", node: String = "node-x") -> PeerHello {
        PeerHello(
            clusterID: cluster, nodeID: node, epoch: 1, versionVector: [], mintingKeyFingerprint: MintingKey(secret: TestNode.clusterSecret).fingerprint)
    }

    func operation(_ sequence: UInt64, epoch: UInt64 = 1, bytes: [UInt8]? = nil) throws -> PeerOperation {
        let stamp = HLCTimestamp(millis: SystemClock.wallMillis(), counter: 0)
        let op = RegistrationOp(
            device: DeviceRef(
                id: DeviceID(UUID128(high: 0xAB, low: sequence)), created: stamp, origin: NodeID(trusted: "node-x"), vendor: Vendor(trusted: "com.peer")),
            bundle: try BundleID(parsing: "com.peer.app"), claims: [Identifier(kind: .idfv, value: UUID128(high: 0xCD, low: sequence))],
            merged: [], seen: stamp)
        return PeerOperation(origin: "node-x", epoch: epoch, sequence: sequence, hlc: stamp.rawValue, operation: (bytes ?? OperationCodec.encode(.registration(op)))[...])
    }

    @Test func badPeerInputIsRefusedWholeAndTheConnectionClosed() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path)
        let bystander = try await node.client()
        let acknowledged = try await bystander.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1))

        /// Says hello as node-x, sends `frames`, and returns what came back and whether the node closed.
        func peer(_ frames: [PeerFrame], hello: PeerHello? = nil, proof: PeerProof = PeerProof(secret: TestNode.clusterSecret)) throws -> (
            answers: [PeerFrame], closed: Bool
        ) {
            let raw = try RawConnection(port: node.port)
            defer { raw.close() }
            let sent = hello ?? self.hello()
            guard case .helloAccepted = try raw.sendPeerHello(sent, sign: { proof.sign(.hello, challenge: $0, nodeID: sent.nodeID) })?.body else {
                return ([], false)
            }
            for frame in frames { try raw.send(frame) }
            let (frames, closed) = raw.readPeerFramesAndClose()
            return (frames, closed)
        }
        func refusal(_ result: (answers: [PeerFrame], closed: Bool)) -> ErrorCode? {
            guard result.closed, case .refusal(let error) = result.answers.last else { return nil }
            return error.code
        }

        #expect(refusal(try peer([], hello: hello(cluster: "other"))) == .wrongCluster)
        #expect(refusal(try peer([], hello: hello(node: "node-test"))) == .duplicateNodeID)
        // A peer without the cluster secret: its proof of this connection's challenge fails.
        #expect(refusal(try peer([], proof: PeerProof(secret: "not the cluster secret"))) == .unauthenticated)
        // A malformed operation after a good one: the batch is refused whole.
        #expect(refusal(try peer([.batch(OperationBatch(batchID: 1, operations: [try operation(1), try operation(2, bytes: [0xFF, 0x00])]))])) == .invalidOperation)
        // An operation numbered in epoch 0.
        #expect(refusal(try peer([.batch(OperationBatch(batchID: 1, operations: [try operation(1, epoch: 0)]))])) == .invalidOperation)
        // Past the batch limit.
        let many = try (1...UInt64(PeerLink.maxBatchOperations + 1)).map { try operation($0) }
        #expect(refusal(try peer([.batch(OperationBatch(batchID: 1, operations: many))])) == .batchTooLarge)
        // A frame the sender may not send.
        #expect(refusal(try peer([.ack(BatchAck(batchID: 1, held: []))])) == .unexpectedPeerFrame)
        #expect(try await node.client().stats().deviceCount == 1, "nothing of the refused batches was applied")

        // A gap: the first batch is applied and acknowledged, the one after the gap refused.
        let gap = try peer([
            .batch(OperationBatch(batchID: 1, operations: [try operation(1)])),
            .batch(OperationBatch(batchID: 2, operations: [try operation(3)])),
        ])
        guard case .welcome = gap.answers.first, case .ack(let ack) = gap.answers.dropFirst().first else {
            Issue.record("expected a welcome and an acknowledgement, got \(gap.answers)")
            return
        }
        #expect(ack.batchID == 1 && ack.held.contains(LogPosition(origin: "node-x", epoch: 1, sequence: 1)))
        #expect(refusal(gap) == .invalidOperation)
        let stats = try await node.client().stats()
        #expect(stats.deviceCount == 2 && stats.versionVector.contains(LogPosition(origin: "node-x", epoch: 1, sequence: 1)))
        for code in [ErrorCode.wrongCluster, .duplicateNodeID, .invalidOperation, .batchTooLarge, .unexpectedPeerFrame] {
            #expect((stats.errors[code] ?? 0) > 0, "\(code) counted")
        }

        // A client connection that sends peer messages: a connection-level error, nothing applied.
        let client = try RawConnection(port: node.port)
        _ = try client.sendHello()
        try client.send(PeerFrame.batch(OperationBatch(batchID: 1, operations: [try operation(2)])))
        let (frames, closed) = client.readFramesAndClose()
        client.close()
        if case .error(let error) = frames.last?.body {
            #expect(error.code.closesConnection && closed, "\(error)")
        } else {
            Issue.record("a client connection sending a peer frame got \(frames)")
        }
        #expect(try await node.client().stats().deviceCount == 2)

        // What was acknowledged is untouched, and the bystander carries on.
        #expect(try await bystander.resolve(deviceID: acknowledged.deviceID).deviceID == acknowledged.deviceID)
        await bystander.close()
        try await node.stop()
    }
}
