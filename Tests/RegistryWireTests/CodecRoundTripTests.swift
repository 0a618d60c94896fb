import CRegistryProto
import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

@Suite struct CodecRoundTripTests {
    static let idfv = PresentedIdentifier(rawKind: 2, text: "11111111-1111-4111-8111-111111111111")
    static let keychain = PresentedIdentifier(rawKind: 1, text: "AAAAAAAA-aaaa-4aaa-8aaa-aaaaaaaaaaaa")

    static let clientBodies: [ClientBody] = [
        .hello(Hello(version: ProtocolVersion(major: 1, minor: 7), role: .admin, clientName: "tests/1.0 ✓")),
        .hello(Hello(role: .unknown(42), clientName: "")),
        .register(RegisterRequest(bundleID: "com.v.a", identifiers: [keychain, idfv])),
        .register(RegisterRequest(bundleID: "", identifiers: [])),
        .registerBatch([
            RegisterRequest(bundleID: "com.v.a", identifiers: [idfv]), RegisterRequest(bundleID: "com.v.b", identifiers: [keychain]),
        ]),
        .registerBatch([]),
        .resolve(deviceID: "01a200f1-a937-78a7-859a-016864593c7a"),
        .lookup(LookupRequest(scope: .bundle("com.v.a"), identifier: idfv)),
        .lookup(LookupRequest(scope: .vendor("acme"), identifier: nil)),
        .lookup(LookupRequest(scope: .unspecified, identifier: keychain)),
        .stats,
        .snapshot,
        .bind(BindingRequest(scope: .bundle("com.v.a"), account: "user-1@example.com ✓", deviceID: "01a200f1-a937-78a7-859a-016864593c7a")),
        .unbind(BindingRequest(scope: .vendor("acme"), account: "u", deviceID: "")),
        .unbind(BindingRequest(scope: .unspecified, account: "", deviceID: "x")),
        .account(AccountQuery(scope: .vendor("com.v"), subject: .account("user-1"))),
        .account(AccountQuery(scope: .bundle("com.v.a"), subject: .accountKey("0f000000-0000-4000-8000-000000000001"))),
        .account(AccountQuery(scope: .unspecified, subject: .device("d"))),
        .account(AccountQuery(scope: .vendor("v"), subject: .unspecified)),
        .unknown,
    ]

    @Test(arguments: clientBodies)
    func clientFramesRoundTrip(_ body: ClientBody) throws {
        let frame = ClientFrame(requestID: .max - 3, body: body)
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        #expect(try ClientFrame(decoding: buffer) == frame)
    }

    static let record = DeviceRecordMessage(
        deviceID: "01a200f1-a937-78a7-859a-016864593c7a", vendor: "com.v",
        apps: [AppSeenRecord(bundleID: "com.v.a", firstSeenMillis: 1, lastSeenMillis: 2)], aliasIDs: ["x", "y"],
        createdAtMillis: 1_700_000_000_000, createdHLC: 1_700_000_000_000 << 16 | 3, originNodeID: "node-a")

    static var stats: StatsMessage {
        var stats = StatsMessage()
        stats.nodeID = "node-a"
        stats.clusterID = "c"
        stats.serverVersion = "v"
        stats.uptimeMillis = 5
        stats.deviceCount = 6
        stats.aliasCount = 7
        stats.claimCount = 8
        stats.requestsServed = 9
        stats.errors = [.notFound: 2, .malformedFrame: 1, ErrorCode(rawValue: 77): 4]
        stats.logOperations = 10
        stats.logEpoch = 11
        stats.logSequence = 12
        stats.connections = 13
        stats.logCommits = 14
        stats.journalBytes = 16
        stats.journalFiles = 17
        stats.snapshotOperations = 21
        stats.snapshotAgeMillis = 22
        stats.snapshotBytes = 23
        stats.versionVector = [LogPosition(origin: "node-a", epoch: 7, sequence: 42), LogPosition(origin: "node-b", epoch: 1, sequence: 0)]
        for micros: UInt64 in [90, 400, 400, 2_500, 5_000_000] { stats.commitLatency.record(micros: micros) }
        return stats
    }

    static let account = AccountBindingsMessage(
        vendor: "com.v", accountKey: "0f000000-0000-4000-8000-000000000001",
        bound: [BoundDeviceMessage(deviceID: "a", sinceMillis: 1, lastActiveMillis: 1_700_000_000_000)],
        unbound: [
            UnboundDeviceMessage(deviceID: "b", reason: .replaced, replacedBy: "a", atMillis: 3),
            UnboundDeviceMessage(deviceID: "c", reason: .refused, atMillis: 4), UnboundDeviceMessage(deviceID: "e", reason: .unbound, atMillis: 5),
        ])

    static let serverBodies: [ServerBody] = [
        .helloAccepted(
            HelloAccepted(
                version: .current, nodeID: "node-a", clusterID: "prod", serverVersion: "registryd 0.1.0", limits: .default)),
        .registerResult(
            RegisterResult(deviceID: "d", created: true, vendor: "com.v", replacedDeviceIDs: ["a", "b"], rejectedIdentifiers: [idfv])),
        .registerBatchResult([
            .result(RegisterResult(deviceID: "d", created: false, vendor: "v")),
            .error(WireError(code: .invalidBundleID, message: "bad", retryable: false)),
            // As the node makes them: the ID's text is written straight from the UUID.
            .result(
                RegisterResult(
                    deviceIDText: UUIDText(uuid: UUID128(high: 0x0192_0000_7abc_8def, low: 0x8000_1234_5678_9abc)), created: true,
                    vendor: "com.v")),
        ]),
        .device(record),
        .stats(stats),
        .snapshotTaken(SnapshotTaken(operations: 1_000_000, bytes: 104_857_600, durationMillis: 3_500, journalFilesRemoved: 4)),
        .bindResult(BindResultMessage(outcome: .bound, replacedDeviceID: "old", account: account)),
        .bindResult(BindResultMessage(outcome: .rejected, account: AccountBindingsMessage(vendor: "v", accountKey: "k", bound: [], unbound: []))),
        .bindResult(BindResultMessage(outcome: .notBound, account: nil)),
        .accounts([account, account]),
        .accounts([]),
        .error(WireError(code: .unavailable, message: "later", retryable: true)),
        .error(WireError(code: ErrorCode(rawValue: 555), message: "from a newer server")),
        .unknown,
    ]

    @Test(arguments: serverBodies)
    func serverFramesRoundTrip(_ body: ServerBody) throws {
        let frame = ServerFrame(requestID: 99, body: body)
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        #expect(try ServerFrame(decoding: buffer) == frame)
    }

    @Test func operationsRoundTrip() throws {
        let vendor = Vendor(trusted: "com.v")
        let device = DeviceRef(
            id: DeviceID(UUID128(high: 1, low: 2)), created: HLCTimestamp(millis: 9, counter: 1), origin: NodeID(trusted: "n-1"),
            vendor: vendor)
        let other = DeviceRef(
            id: DeviceID(UUID128(high: 3, low: 4)), created: HLCTimestamp(millis: 10, counter: 0), origin: NodeID(trusted: "n-2"),
            vendor: vendor)
        let op = Operation.registration(
            RegistrationOp(
                device: device, bundle: try BundleID(parsing: "com.v.a"),
                claims: [Identifier(kind: .idfv, value: UUID128(high: 5, low: 6))], merged: [other],
                seen: HLCTimestamp(millis: 11, counter: 0)))
        #expect(try OperationCodec.decode(OperationCodec.encode(op)) == op)
        for kind in [BindingChange.Kind.bind, .unbind] {
            let change = Operation.binding(
                BindingChange(
                    kind: kind, vendor: vendor, account: UUID128(high: 7, low: 8), device: device.id, time: HLCTimestamp(millis: 12, counter: 3),
                    origin: NodeID(trusted: "n-1")))
            #expect(try OperationCodec.decode(OperationCodec.encode(change)) == change)
        }
    }

    /// The hand-written encoder writes a binding change as protobuf-c packs it.
    @Test func bindingEncodingMatchesProtobufCsPacking() throws {
        var random = SplitMix64(seed: 20_261_128)
        for _ in 0..<200 {
            let change = BindingChange(
                kind: random.next() % 2 == 0 ? .bind : .unbind, vendor: Vendor(trusted: "com.v\(random.next() % 1_000)"),
                account: UUID128(high: random.next(), low: random.next()), device: DeviceID(UUID128(high: random.next(), low: random.next())),
                time: HLCTimestamp(rawValue: random.next() >> (random.next() % 64)), origin: NodeID(trusted: "node-\(random.next() % 100)"))
            let arena = CArena()
            var message = Registry__V1__BindingChange()
            registry__v1__binding_change__init(&message)
            message.kind = Registry__V1__BindingKind(rawValue: UInt32(change.kind.rawValue))
            message.vendor = arena.string(change.vendor.name)
            message.account = arena.bytes(change.account)
            message.device_id = arena.bytes(change.device.uuid)
            message.at_hlc = change.time.rawValue
            message.origin_node_id = arena.string(change.origin.value)
            var operation = Registry__V1__Operation()
            registry__v1__operation__init(&operation)
            operation.body_case = REGISTRY__V1__OPERATION__BODY_BINDING
            operation.binding = arena.new(message)
            var buffer = ByteBuffer()
            try withExtendedLifetime(arena) { try ProtobufC.pack(&operation, into: &buffer) }
            #expect(OperationCodec.encode(.binding(change)) == Array(buffer.readableBytesView))
            #expect(try OperationCodec.decode(Array(buffer.readableBytesView)) == .binding(change))
        }
    }

    @Test func invalidBindingChangesAreRefused() throws {
        let good = BindingChange(
            kind: .bind, vendor: Vendor(trusted: "com.v"), account: UUID128(high: 1, low: 2), device: DeviceID(UUID128(high: 3, low: 4)),
            time: HLCTimestamp(millis: 5, counter: 0), origin: NodeID(trusted: "node-a"))
        var bytes = OperationCodec.encode(.binding(good))
        // Field 1 of the BindingChange, the kind, is its first byte after the two-byte header.
        #expect(bytes[2] == 0x08 && bytes[3] == 0x01)
        bytes[3] = 0x03
        #expect(throws: CodecError.invalidOperation("binding: unknown kind 3")) { try OperationCodec.decode(bytes) }
        bytes[3] = 0x00
        #expect(throws: CodecError.invalidOperation("binding: unknown kind 0")) { try OperationCodec.decode(bytes) }
        // A binding with no vendor, nor anything else.
        #expect(throws: CodecError.invalidOperation("binding: unknown kind 0")) { try OperationCodec.decode([0x1A, 0x00]) }
        let noVendor: [UInt8] = [0x1A, 0x02, 0x08, 0x01]
        #expect(throws: CodecError.invalidOperation("binding: no vendor")) { try OperationCodec.decode(noVendor) }
    }

    /// The hand-written encoder writes exactly what protobuf-c packs for the same operation, over
    /// seeded random operations: zero and huge HLCs (left out, ten-byte varints), no claims or
    /// several, merged devices, multi-byte text, strings whose length takes two bytes. Appended
    /// one after another, each decodes back to itself.
    @Test func encodingMatchesProtobufCsPacking() throws {
        var random = SplitMix64(seed: 20_261_125)
        func hlc() -> HLCTimestamp {
            HLCTimestamp(rawValue: [0, 1, 127, 128, .max, random.next()][Int.random(in: 0..<6, using: &random)])
        }
        func text(_ stem: String, _ alphabet: [String], upTo count: Int) -> String {
            stem + (0..<Int.random(in: 0...count, using: &random)).map { _ in alphabet.randomElement(using: &random)! }.joined()
        }
        func ref() -> DeviceRef {
            DeviceRef(
                id: DeviceID(UUID128(high: random.next(), low: random.next())), created: hlc(),
                origin: NodeID(trusted: text("n", ["a", "0", "-"], upTo: 63)), vendor: Vendor(trusted: text("v", ["a", "é", "✓", "."], upTo: 70)))
        }
        var appended: [UInt8] = [0xAB]
        for _ in 0..<500 {
            let op = RegistrationOp(
                device: ref(), bundle: try BundleID(parsing: text("com.v.a", ["b", "0", "-"], upTo: 150)),
                claims: IdentifierList((0..<Int.random(in: 0...2, using: &random)).map { _ in
                    Identifier(kind: IdentifierKind.allCases.randomElement(using: &random)!, value: UUID128(high: random.next(), low: random.next()))
                }),
                merged: (0..<Int.random(in: 0...2, using: &random)).map { _ in ref() }, seen: hlc())
            let encoded = OperationCodec.encode(.registration(op))
            #expect(encoded == (try Self.packedByProtobufC(op)))
            let start = appended.count
            OperationCodec.encode(.registration(op), appendingTo: &appended)
            #expect(Array(appended[start...]) == encoded)
            #expect(try OperationCodec.decode(encoded) == .registration(op))
        }
    }

    /// `op` as protobuf-c packs it: the reference the hand-written encoder must match.
    static func packedByProtobufC(_ op: RegistrationOp) throws -> [UInt8] {
        let arena = CArena()
        return try withExtendedLifetime(arena) {
            func deviceRef(_ ref: DeviceRef) -> UnsafeMutablePointer<Registry__V1__DeviceRef> { CloneCodecTests.packedRef(ref, in: arena) }
            var registration = Registry__V1__RegistrationOp()
            registry__v1__registration_op__init(&registration)
            registration.device = deviceRef(op.device)
            registration.bundle_id = arena.string(op.bundle.value)
            registration.n_claims = op.claims.count
            registration.claims = arena.array(count: op.claims.count) { index in
                var claim = Registry__V1__ClaimedIdentifier()
                registry__v1__claimed_identifier__init(&claim)
                claim.kind = Registry__V1__IdentifierKind(rawValue: .init(truncatingIfNeeded: op.claims[index].kind.rawValue))
                claim.value = arena.bytes(op.claims[index].value)
                return arena.new(claim)
            }
            registration.n_merged = op.merged.count
            registration.merged = arena.array(count: op.merged.count) { deviceRef(op.merged[$0]) }
            registration.seen_hlc = op.seen.rawValue
            var message = Registry__V1__Operation()
            registry__v1__operation__init(&message)
            message.body_case = REGISTRY__V1__OPERATION__BODY_REGISTRATION
            message.registration = arena.new(registration)
            var buffer = ByteBuffer()
            try ProtobufC.pack(&message, into: &buffer)
            return Array(buffer.readableBytesView)
        }
    }

    @Test func invalidOperationsAreRefused() throws {
        // A valid Operation message whose device ref is missing.
        let bytes: [UInt8] = [0x0A, 0x00]  // field 1 (registration), empty message
        #expect(throws: CodecError.invalidOperation("an operation names no device")) {
            try OperationCodec.decode(bytes)
        }
        #expect(throws: CodecError.self) { try OperationCodec.decode([0xFF, 0xFF, 0xFF]) }
    }

    /// A registration presents at most one identifier of each kind, two in all: an operation
    /// that claims more was not made by a node, and is refused with a typed error.
    @Test func aRegistrationWithMoreThanTwoClaimsIsRefused() throws {
        // Protobuf written by hand: every length and value here is below 128, one byte each.
        func field(_ number: UInt8, _ payload: [UInt8]) -> [UInt8] { [number << 3 | 2, UInt8(payload.count)] + payload }
        func varint(_ number: UInt8, _ value: UInt8) -> [UInt8] { [number << 3, value] }
        func claim(_ kind: UInt8, _ low: UInt8) -> [UInt8] {
            field(3, varint(1, kind) + field(2, [UInt8](repeating: 0, count: 15) + [low]))
        }
        func operation(claims: [[UInt8]]) -> [UInt8] {
            let device = field(1, [UInt8](repeating: 0x11, count: 16)) + varint(2, 5) + field(3, Array("node-a".utf8)) + field(4, Array("com.v".utf8))
            return field(1, field(1, device) + field(2, Array("com.v.a".utf8)) + claims.joined() + varint(5, 6))
        }
        let two = try OperationCodec.decode(operation(claims: [claim(1, 1), claim(2, 2)]))
        guard case .registration(let op) = two else { Issue.record("not a registration: \(two)"); return }
        #expect(Array(op.claims) == [Identifier(kind: .keychain, value: UUID128(high: 0, low: 1)), Identifier(kind: .idfv, value: UUID128(high: 0, low: 2))])
        let three = operation(claims: [claim(1, 1), claim(2, 2), claim(2, 3)])
        let refusal = CodecError.invalidOperation("a registration claims at most 2 identifiers, not 3")
        #expect(throws: refusal) { try OperationCodec.decode(three) }
        #expect(throws: refusal) { try OperationCodec.decode(ByteBuffer(bytes: three)) }
    }

    @Test(arguments: [
        [0x08] as [UInt8],  // field 1 varint with no value
        [0x12, 0x05, 0x01],  // length-delimited field longer than the data
        [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],  // overlong tag
        [0x0B],  // start-group wire type
    ])
    func malformedBytesAreATypedError(_ bytes: [UInt8]) {
        #expect(throws: CodecError.malformed(message: "registry.v1.ClientFrame", bytes: bytes.count)) {
            try ClientFrame(decoding: ByteBuffer(bytes: bytes))
        }
    }

    @Test func emptyPayloadIsAFrameWithNoBody() throws {
        #expect(try ClientFrame(decoding: ByteBuffer()) == ClientFrame(requestID: 0, body: .unknown))
    }

    /// Bytes from anywhere either fail with a typed error, or decode to a value whose encoding
    /// is a fixed point: it decodes to the same value and encodes to the same bytes again. The
    /// inputs are seeded random bytes and valid frames with a byte changed.
    @Test func decodingAnyBytesGivesATypedErrorOrAValueThatReencodesStably() throws {
        var generator = SplitMix64(seed: 2024)
        var inputs = (0..<2_000).map { _ in
            (0..<Int(generator.next() % 64)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        for body in Self.clientBodies {
            var buffer = ByteBuffer()
            try ClientFrame(requestID: 7, body: body).encode(into: &buffer)
            let valid = Array(buffer.readableBytesView)
            for _ in 0..<100 where !valid.isEmpty {
                var changed = valid
                changed[Int(generator.next() % UInt64(valid.count))] = UInt8(truncatingIfNeeded: generator.next())
                inputs.append(changed)
            }
        }
        // The decoders' errors are typed (`throws(CodecError)`), so a failure is one by construction.
        var (clientValues, serverValues) = (0, 0)
        for bytes in inputs {
            if let frame = try? ClientFrame(decoding: ByteBuffer(bytes: bytes)) {
                clientValues += 1
                try expectStable(frame, encode: { try $0.encode(into: &$1) }, decode: { try ClientFrame(decoding: $0) })
            }
            if let frame = try? ServerFrame(decoding: ByteBuffer(bytes: bytes)) {
                serverValues += 1
                try expectStable(frame, encode: { try $0.encode(into: &$1) }, decode: { try ServerFrame(decoding: $0) })
            }
            if let operation = try? OperationCodec.decode(bytes) {
                let encoded = OperationCodec.encode(operation)
                #expect(try OperationCodec.decode(encoded) == operation)
                #expect(OperationCodec.encode(try OperationCodec.decode(encoded)) == encoded)
            }
        }
        #expect(clientValues > 100 && serverValues > 100, "too few inputs decoded to exercise re-encoding")
    }

    /// `value` encodes (or is refused for a NUL, which protobuf-c cannot pack) to bytes that
    /// decode to the same value and encode to the same bytes.
    private func expectStable<Frame: Equatable>(
        _ value: Frame, encode: (Frame, inout ByteBuffer) throws -> Void, decode: (ByteBuffer) throws -> Frame
    ) throws {
        var first = ByteBuffer()
        do {
            try encode(value, &first)
        } catch let error as CodecError {
            guard case .invalidField(let reason) = error, reason.contains("NUL") else { throw error }
            return
        }
        let again = try decode(first)
        #expect(again == value, "\(value) came back as \(again)")
        var second = ByteBuffer()
        try encode(again, &second)
        #expect(first == second)
    }

    /// protobuf-c drops a string field's length; the codec reads it back from the unpacking
    /// arena, so a NUL inside a field is kept (and refused later by the field's rule). When
    /// protobuf-c allocates strings otherwise, this fails.
    @Test func aStringFieldHoldingNULIsReadWhole() throws {
        // ResolveRequest{device_id: "abc\0def"} in ClientFrame{request_id: 5}, written by hand.
        let text = Array("abc\u{0}def".utf8)
        let bytes: [UInt8] = [0x08, 0x05, 0x2A, UInt8(text.count + 2), 0x0A, UInt8(text.count)] + text
        #expect(try ClientFrame(decoding: ByteBuffer(bytes: bytes)) == ClientFrame(requestID: 5, body: .resolve(deviceID: "abc\u{0}def")))
        // An absent string reads as empty, a present empty one too.
        #expect(try ClientFrame(decoding: ByteBuffer(bytes: [0x08, 0x05, 0x2A, 0x00])).body == .resolve(deviceID: ""))
        #expect(try ClientFrame(decoding: ByteBuffer(bytes: [0x08, 0x05, 0x2A, 0x02, 0x0A, 0x00])).body == .resolve(deviceID: ""))
    }

    /// protobuf-c would pack such a string up to its NUL, sending other text than asked for.
    @Test func encodingAStringHoldingNULIsRefused() {
        var buffer = ByteBuffer()
        #expect(throws: CodecError.self) {
            try ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: "com.v.a\u{0}x", identifiers: [Self.idfv]))).encode(into: &buffer)
        }
        #expect(buffer.readableBytes == 0)
    }
}
