import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

/// Peer frames survive encoding and decoding through protobuf-c, and bad bytes are typed errors.
@Suite struct PeerFrameCodecTests {
    func roundTrip(_ frame: PeerFrame) throws -> PeerFrame {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return try PeerFrame(decoding: buffer)
    }

    @Test func everyPeerFrameRoundTrips() throws {
        let positions = [LogPosition(origin: "node-a", epoch: 3, sequence: 9), LogPosition(origin: "node-b", epoch: 1, sequence: 2)]
        let stamp = HLCTimestamp(millis: 1_700_000_000_000, counter: 3)
        let op = Operation.registration(
            RegistrationOp(
                device: DeviceRef(id: DeviceID(UUID128(high: 5, low: 6)), created: stamp, origin: NodeID(trusted: "node-a"), vendor: Vendor(trusted: "com.v")),
                bundle: try BundleID(parsing: "com.v.app"), claims: [Identifier(kind: .keychain, value: UUID128(high: 1, low: 2))], merged: [],
                seen: stamp))
        let logged = LoggedOperation(origin: NodeID(trusted: "node-a"), epoch: 3, sequence: 9, timestamp: stamp, operation: op)
        let frames: [PeerFrame] = [
            .hello(PeerHello(clusterID: "c", nodeID: "node-a", epoch: 3, versionVector: positions, mintingKeyFingerprint: .max)),
            .hello(
                PeerHello(
                    clusterID: "c", nodeID: "node-a", epoch: 3, versionVector: positions, mintingKeyFingerprint: 1, deviceRecords: 1 << 40,
                    claims: .max)),
            .welcome(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: positions, maxBatchOperations: 1024)),
            // A receiver's version travels in its welcome (vendor moves wait for every member's).
            .welcome(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 8, version: ProtocolVersion(major: 1, minor: 0))),
            .batch(OperationBatch(batchID: 77, operations: [PeerOperation(logged), PeerOperation(logged)])),
            .ack(BatchAck(batchID: 77, held: positions)),
            .refusal(WireError(code: .wrongCluster, message: "no", retryable: false)),
        ]
        for frame in frames { #expect(try roundTrip(frame) == frame) }
        let batchFrame = try #require(frames.first { if case .batch = $0 { true } else { false } })
        guard case .batch(let batch) = try roundTrip(batchFrame) else {
            Issue.record("a batch did not decode as a batch")
            return
        }
        #expect(try batch.operations[0].decoded() == logged)
    }

    @Test func membershipOperationsAndSnapshotRecordsRoundTrip() throws {
        let op = Operation.membership(
            MembershipOp(node: NodeID(trusted: "node-d"), address: "[::1]:7400", removed: false, at: HLCTimestamp(millis: 9, counter: 1)))
        #expect(try OperationCodec.decode(OperationCodec.encode(op)) == op)
        let removal = Operation.membership(MembershipOp(node: NodeID(trusted: "node-d"), address: "", removed: true, at: HLCTimestamp(millis: 10, counter: 0)))
        #expect(try OperationCodec.decode(OperationCodec.encode(removal)) == removal)
        let record = SnapshotRecord.member(NodeID(trusted: "node-d"), Member(address: "h:1", addressAt: HLCTimestamp(millis: 3, counter: 0), removed: true))
        var bytes = [UInt8]()
        SnapshotCodec.encode(record, into: &bytes)
        let decoded = try bytes.withUnsafeBytes { (raw) throws(CodecError) in try SnapshotCodec.decodeRecord(raw) }
        #expect(decoded == record)
    }

    @Test func bindingSnapshotRecordsRoundTripAndABadKindIsRefused() throws {
        for kind in [BindingChange.Kind.bind, .unbind] {
            let record = SnapshotRecord.binding(
                kind: kind, vendor: 3, account: UUID128(high: 1, low: 2), device: DeviceID(UUID128(high: 3, low: 4)),
                time: HLCTimestamp(millis: 5, counter: 6), origin: 7)
            var bytes = [UInt8]()
            SnapshotCodec.encode(record, into: &bytes)
            let decoded = try bytes.withUnsafeBytes { (raw) throws(CodecError) in try SnapshotCodec.decodeRecord(raw) }
            #expect(decoded == record)
            // The kind is the byte after the tag.
            bytes[1] = 9
            #expect(throws: CodecError.invalidField("snapshot binding of kind 9")) {
                try bytes.withUnsafeBytes { (raw) throws(CodecError) in try SnapshotCodec.decodeRecord(raw) }
            }
        }
    }

    @Test func badBytesAreTypedErrors() throws {
        #expect(throws: CodecError.self) { try PeerFrame(decoding: ByteBuffer(bytes: [0x0A, 0xFF, 0xFF])) }
        let bad = PeerOperation(origin: "node-a", epoch: 1, sequence: 1, hlc: 1, operation: [0x0A, 0x02, 0x08])
        #expect(throws: CodecError.self) { try bad.decoded() }
        let badOrigin = PeerOperation(origin: "NODE A", epoch: 1, sequence: 1, hlc: 1, operation: [])
        #expect(throws: CodecError.self) { try badOrigin.decoded() }
    }

    /// One decoder for a session's operations gives what each decoded alone gives, and remembers
    /// no refusal: a bad origin after good ones is still refused, and a good one after it accepted.
    @Test func aSessionsDecoderGivesWhatEachOperationDecodedAloneGives() throws {
        let stamp = HLCTimestamp(millis: 1_700_000_000_000, counter: 3)
        var peerOperations = [PeerOperation]()
        for sequence in 1...40 as ClosedRange<UInt64> {
            let origin = NodeID(trusted: sequence % 3 == 0 ? "node-b" : "node-a")
            let op = Operation.registration(
                RegistrationOp(
                    device: DeviceRef(id: DeviceID(UUID128(high: 5, low: sequence)), created: stamp, origin: origin, vendor: Vendor(trusted: "com.v\(sequence % 2)")),
                    bundle: try BundleID(parsing: "com.v\(sequence % 2).app\(sequence % 5)"),
                    claims: [Identifier(kind: .idfv, value: UUID128(high: 1, low: sequence))], merged: [], seen: stamp))
            peerOperations.append(PeerOperation(LoggedOperation(origin: origin, epoch: 3, sequence: sequence, timestamp: stamp, operation: op)))
        }
        var decoder = OperationDecoder()
        for operation in peerOperations { #expect(try operation.decoded(using: &decoder) == operation.decoded()) }
        let badOrigin = PeerOperation(origin: "NODE A", epoch: 1, sequence: 1, hlc: 1, operation: peerOperations[0].operation)
        #expect(throws: CodecError.self) { try badOrigin.decoded(using: &decoder) }
        #expect(try peerOperations[1].decoded(using: &decoder) == peerOperations[1].decoded())
    }
}
