import NIOCore
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// The receiving side of a peer connection, without sockets.
@Suite struct PeerSessionStateMachineTests {
    let identity = PeerIdentity(
        clusterID: "c1", nodeID: NodeID(trusted: "node-a"), epoch: 3, mintingKeyFingerprint: 42, proof: .test, vendorRulesFingerprint: 77)

    func hello(
        cluster: String = "c1", node: String = "node-b", fingerprint: UInt64 = 42, major: UInt32 = 1, rules: UInt64 = 77,
        vector: [LogPosition] = [], deviceRecords: UInt64 = 0, claims: UInt64 = 0
    ) -> PeerFrame {
        .hello(
            PeerHello(
                clusterID: cluster, nodeID: node, epoch: 1, version: ProtocolVersion(major: major, minor: 0), versionVector: vector,
                mintingKeyFingerprint: fingerprint,
                proof: PeerProof.test.sign(.hello, challenge: PeerSessionStateMachine.testChallenge, nodeID: node), challenge: 5,
                vendorRulesFingerprint: rules, deviceRecords: deviceRecords, claims: claims))
    }

    func operation(sequence: UInt64, bytes: [UInt8]? = nil) throws -> PeerOperation {
        let stamp = HLCTimestamp(millis: 1_000, counter: 0)
        let op = RegistrationOp(
            device: DeviceRef(
                id: DeviceID(UUID128(high: 1, low: sequence)), created: stamp, origin: NodeID(trusted: "node-b"), vendor: Vendor(trusted: "com.v")),
            bundle: try BundleID(parsing: "com.v.app"), claims: [Identifier(kind: .idfv, value: UUID128(high: 2, low: sequence))], merged: [],
            seen: stamp)
        return PeerOperation(
            origin: "node-b", epoch: 1, sequence: sequence, hlc: stamp.rawValue, operation: (bytes ?? OperationCodec.encode(.registration(op)))[...])
    }

    /// `frame` as the handler receives it: protobuf bytes, which a batch is read from directly.
    func payload(_ frame: PeerFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    func refusalCode(_ action: PeerSessionStateMachine.Action) -> ErrorCode? {
        if case .refuse(let error) = action { return error.code }
        return nil
    }

    /// What a hello says the peer holds is handed over once, before the first batch; a hello
    /// that says nothing of its counts (an earlier version), or names an invalid log, hands
    /// over nothing.
    @Test func thePeersHoldingsAreHandedOverOnceBeforeTheFirstBatch() throws {
        let vector = [LogPosition(origin: "node-b", epoch: 1, sequence: 900)]
        var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        _ = machine.received(hello(vector: vector, deviceRecords: 800, claims: 1_600))
        var expected = VersionVector()
        expected.recordAll(through: 900, in: LogID(origin: NodeID(trusted: "node-b"), epoch: 1))
        #expect(machine.holdingsBeforeFirstBatch() == PeerHoldings(vector: expected, deviceRecords: 800, claims: 1_600))
        #expect(machine.holdingsBeforeFirstBatch() == nil)

        var earlier = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        _ = earlier.received(hello(vector: vector))
        #expect(earlier.holdingsBeforeFirstBatch() == nil)
        var invalid = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        _ = invalid.received(hello(vector: [LogPosition(origin: "", epoch: 1, sequence: 9)], deviceRecords: 8, claims: 16))
        #expect(invalid.holdingsBeforeFirstBatch() == nil)
    }

    @Test func aHelloFromTheClusterIsWelcomedAndItsBatchesDecoded() throws {
        var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        #expect(machine.received(hello()) == .welcome(peer: NodeID(trusted: "node-b"), challenge: 5))
        let action = machine.received(.batch(OperationBatch(batchID: 7, operations: [try operation(sequence: 1), try operation(sequence: 2)])))
        guard case .apply(let batchID, let operations) = action else {
            Issue.record("expected apply, got \(action)")
            return
        }
        #expect(batchID == 7 && operations.map(\.sequence) == [1, 2] && operations[0].origin == NodeID(trusted: "node-b"))
        // The same batch as bytes, read without protobuf-c, gives the same action.
        let again = OperationBatch(batchID: 8, operations: [try operation(sequence: 3), try operation(sequence: 4)])
        var twin = machine
        #expect(try machine.received(payload: payload(.batch(again))) == twin.received(.batch(again)))
    }

    /// A hello that does not name its vendor rules (an earlier version's) is welcomed.
    @Test func aHelloWithoutVendorRulesIsWelcomed() {
        var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        #expect(machine.received(hello(rules: 0)) == .welcome(peer: NodeID(trusted: "node-b"), challenge: 5))
    }

    @Test func badHellosAreRefusedWithTheirTypedCodes() {
        let cases: [(PeerFrame, ErrorCode)] = [
            (hello(cluster: "other"), .wrongCluster),
            (hello(node: "node-a"), .duplicateNodeID),
            (hello(fingerprint: 41), .mintingKeyMismatch),
            (hello(rules: 78), .vendorRulesMismatch),
            (hello(major: 2), .unsupportedVersion),
            (hello(node: "Not A Node"), .invalidArgument),
            (.batch(OperationBatch(batchID: 1, operations: [])), .handshakeRequired),
        ]
        for (frame, code) in cases {
            var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
            #expect(refusalCode(machine.received(frame)) == code, "\(frame)")
            #expect(machine.state == .closed)
            #expect(machine.received(hello()) == .ignore, "a refused session takes nothing more")
        }
    }

    /// A removed node's hello is answered with a welcome that proves this node, then the refusal,
    /// so that the removed node believes it (``PeerLinkStateMachine`` believes a refusal only
    /// after a proven welcome); the session takes nothing more.
    @Test func aRemovedPeerIsWelcomedThenRefused() {
        var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4, removed: [NodeID(trusted: "node-b")])
        guard case .welcomeThenRefuse(let peer, let challenge, let refusal) = machine.received(hello()) else {
            Issue.record("a removed peer's hello must be welcomed, then refused")
            return
        }
        #expect(peer == NodeID(trusted: "node-b") && challenge == 5 && refusal.code == .nodeRemoved)
        #expect(machine.state == .closed)
        #expect(machine.received(.batch(OperationBatch(batchID: 1, operations: []))) == .ignore)
    }

    /// A peer's own refusal ends the session and asks the handler to close: before, the session
    /// was marked closed and the connection left open, buffering whatever the peer sent next.
    @Test func aRefusalFromThePeerClosesTheConnection() {
        let refusal = PeerFrame.refusal(WireError(code: .invalidArgument, message: "no"))
        var waiting = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        #expect(waiting.received(refusal) == .close)
        var streaming = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        _ = streaming.received(hello())
        #expect(streaming.received(refusal) == .close)
        #expect(streaming.state == .closed && streaming.received(refusal) == .ignore)
    }

    @Test func badBatchesAreRefusedWhole() throws {
        let cases: [(PeerFrame, ErrorCode)] = [
            (.batch(OperationBatch(batchID: 1, operations: try (1...5).map { try operation(sequence: $0) })), .batchTooLarge),
            (.batch(OperationBatch(batchID: 1, operations: [try operation(sequence: 1), try operation(sequence: 2, bytes: [0xFF, 0x01])])), .invalidOperation),
            (.batch(OperationBatch(batchID: 1, operations: [try operation(sequence: 0)])), .invalidOperation),
            (hello(), .unexpectedPeerFrame),
            (.ack(BatchAck(batchID: 1, held: [])), .unexpectedPeerFrame),
        ]
        for (frame, code) in cases {
            // Decoded by protobuf-c, and as the handler takes it, as bytes: a batch the direct
            // reader leaves gets protobuf-c's path's refusal.
            for asBytes in [false, true] {
                var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
                _ = machine.received(hello())
                let action = asBytes ? try machine.received(payload: payload(frame)) : machine.received(frame)
                #expect(refusalCode(action) == code, "\(frame), as bytes: \(asBytes)")
                #expect(machine.state == .closed)
            }
        }
    }

    /// Before the hello, a batch's bytes are not read directly: the session asks for a hello.
    @Test func aBatchAsBytesBeforeTheHelloIsRefused() throws {
        var machine = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
        let batch = PeerFrame.batch(OperationBatch(batchID: 1, operations: [try operation(sequence: 1)]))
        #expect(refusalCode(try machine.received(payload: payload(batch))) == .handshakeRequired)
        #expect(throws: CodecError.self) {
            var fresh = PeerSessionStateMachine(identity: identity, maxBatchOperations: 4)
            _ = try fresh.received(payload: ByteBuffer(bytes: [0xFF]))
        }
    }
}
