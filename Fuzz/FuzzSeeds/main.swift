// Writes the fuzz targets' seed inputs under the directory given: one of every client, server
// and peer message, framed for the frame decoder, and a real snapshot (a small registry's state)
// with its metadata and records, so that libFuzzer starts from inputs that decode.
import Foundation
import NIOCore
import RegistryCore
import RegistryStorage
import RegistryWire

let output = CommandLine.arguments.dropFirst().first ?? "fuzz-corpus"

func write(_ target: String, _ name: String, _ bytes: [UInt8]) {
    let directory = output + "/" + target
    try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    precondition(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes)), "cannot write \(directory)/\(name)")
}

func payload(_ encode: (inout ByteBuffer) throws -> Void) -> [UInt8] {
    var buffer = ByteBuffer()
    try! encode(&buffer)
    return Array(buffer.readableBytesView)
}

// A small registry: registrations that create, match and merge devices.
var state = RegistryState()
let node = NodeID(trusted: "node-a")
let rules = try! VendorRules()
var operations = [LoggedOperation]()
for (index, (keychain, idfv)) in [
    ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"),
    ("33333333-3333-4333-8333-333333333333", "22222222-2222-4222-8222-222222222222"),
    ("11111111-1111-4111-8111-111111111111", "44444444-4444-4444-8444-444444444444"),
].enumerated() {
    let registration = try! Registration(
        bundle: "com.seed.app\(index)", identifiers: [PresentedIdentifier(rawKind: 1, text: keychain), PresentedIdentifier(rawKind: 2, text: idfv)],
        rules: rules)
    let stamp = HLCTimestamp(millis: 1_700_000_000_000 + UInt64(index), counter: 0)
    let (op, _) = state.register(registration, at: stamp, origin: node) { _ in
        DeviceID(UUID128(high: 0x0189_0000_0000_7000 | UInt64(index), low: 0x8000_0000_0000_0000 | UInt64(index)))
    }
    operations.append(LoggedOperation(origin: node, epoch: 1, sequence: UInt64(index + 1), timestamp: stamp, operation: .registration(op)))
}
operations.append(
    LoggedOperation(
        origin: node, epoch: 1, sequence: 4, timestamp: HLCTimestamp(millis: 1_700_000_000_010, counter: 0),
        operation: .membership(MembershipOp(node: NodeID(trusted: "node-b"), address: "10.0.0.2:7400", removed: false, at: .zero))))

let positions = [LogPosition(origin: "node-a", epoch: 1, sequence: 4)]
let clientBodies: [ClientBody] = [
    .hello(Hello(role: .client, clientName: "seed", token: "rgt1.c3ViPXgK.AAAA")),
    .register(RegisterRequest(bundleID: "com.seed.app", keychain: "11111111-1111-4111-8111-111111111111", idfv: "22222222-2222-4222-8222-222222222222")),
    .registerBatch([RegisterRequest(bundleID: "com.seed.a", idfv: "22222222-2222-4222-8222-222222222222"), RegisterRequest(bundleID: "x", keychain: "nope")]),
    .resolve(deviceID: "01890000-0000-7000-8000-000000000000"),
    .lookup(LookupRequest(scope: .vendor("com.seed"), identifier: PresentedIdentifier(rawKind: 2, text: "22222222-2222-4222-8222-222222222222"))),
    .stats, .snapshot, .removeMember(nodeID: "node-b"),
]
let serverBodies: [ServerBody] = [
    .helloAccepted(HelloAccepted(version: .current, nodeID: "node-a", clusterID: "c", serverVersion: "1", limits: .default, instanceID: 7)),
    .error(WireError(code: .permissionDenied, message: "no", retryable: false)), .stats(StatsMessage()), .memberRemoved(nodeID: "node-b"),
    // A watch stream's frame, which decodes without protobuf-c (WatchEventsReader).
    .watchEvents(
        WatchEventsMessage(
            events: [
                WatchEventMessage(
                    kind: 2, operation: LogPosition(origin: "node-a", epoch: 1, sequence: 7), hlc: 9, vendor: "com.vendor",
                    deviceID: "00000000-0000-0000-0000-000000000001", otherDeviceIDs: ["00000000-0000-0000-0000-000000000002"]),
                WatchEventMessage(
                    kind: 4, operation: LogPosition(origin: "node-b", epoch: 2, sequence: 8), hlc: 10, vendor: "com.vendor",
                    deviceID: "00000000-0000-0000-0000-000000000003", accountID: "00000000-0000-0000-0000-0000000000aa", unbindReason: .replaced,
                    boundDeviceIDs: ["00000000-0000-0000-0000-000000000004"]),
            ], cursor: WatchCursor(clusterID: "c", positions: positions))),
]
for (index, body) in clientBodies.enumerated() {
    let frame = ClientFrame(requestID: UInt64(index + 1), body: body, ackReplicas: index == 2 ? 1 : nil)
    write("ClientFrames", "client-\(index)", payload { try frame.encode(into: &$0) })
    write("FrameDecoder", "client-\(index)", payload { try frame.encodeFrame(into: &$0) })
}
for (index, body) in serverBodies.enumerated() {
    write("ClientFrames", "server-\(index)", payload { try ServerFrame(requestID: 1, body: body).encode(into: &$0) })
}
let peerFrames: [PeerFrame] = [
    .hello(PeerHello(clusterID: "c", nodeID: "node-b", epoch: 1, versionVector: positions, mintingKeyFingerprint: 9)),
    .welcome(PeerWelcome(nodeID: "node-a", epoch: 1, versionVector: positions, maxBatchOperations: 1_000)),
    .batch(OperationBatch(batchID: 1, operations: operations.map(PeerOperation.init))),
    .ack(BatchAck(batchID: 1, held: positions)),
    .snapshotChunk(SnapshotChunk(transferID: 1, offset: 0, totalBytes: 4, data: [1, 2, 3, 4])),
    .snapshotAck(SnapshotAck(transferID: 1, receivedBytes: 4, installed: true, held: positions)),
    .refusal(WireError(code: .clockSkew, message: "ahead", retryable: true)),
]
for (index, frame) in peerFrames.enumerated() {
    write("PeerFrames", "peer-\(index)", payload { try frame.encode(into: &$0) })
    write("FrameDecoder", "peer-\(index)", payload { try frame.encodeFrame(into: &$0) })
}

// The snapshot of that state: mode 0 the whole file, 1 its metadata, 2 each record.
let fs = SimulatedFileSystem()
let metadata = SnapshotCodec.encode(
    SnapshotMetadata(nodeID: node, epoch: 1, clock: HLCTimestamp(millis: 1_700_000_000_010, counter: 0), versionVector: VersionVector(), devices: 3))
let writer = try! SnapshotWriter(fs: fs, directory: "/", label: 4, metadata: metadata)
var records = [[UInt8]]()
state.forEachSnapshotRecord { record in
    var bytes = [UInt8]()
    SnapshotCodec.encode(record, into: &bytes)
    records.append(bytes)
    try! bytes.withUnsafeBytes { try writer.append($0) }
}
let path = try! writer.finish()
write("Snapshot", "file", [0] + (try! fs.readAll(path)))
write("Snapshot", "metadata", [1] + metadata)
for (index, record) in records.enumerated() { write("Snapshot", "record-\(index)", [2] + record) }
print("wrote seeds for FrameDecoder, ClientFrames, PeerFrames and Snapshot under \(output)")
