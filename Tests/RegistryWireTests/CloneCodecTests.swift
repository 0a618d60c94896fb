import CRegistryProto
import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

/// The clone operation is written as protobuf-c packs it, survives a snapshot record, and is
/// refused when it breaks its own shape; the clones request and answer round-trip.
@Suite struct CloneCodecTests {
    static func randomRef(_ random: inout SplitMix64) -> DeviceRef {
        DeviceRef(
            id: DeviceID(UUID128(high: random.next(), low: random.next())), created: HLCTimestamp(rawValue: random.next() >> 8),
            origin: NodeID(trusted: "node-\(random.next() % 10)"), vendor: Vendor(trusted: "com.v\(random.next() % 9)"))
    }

    static func randomClone(_ random: inout SplitMix64) throws -> CloneOp {
        let split = random.next() % 2 == 0
        let device = randomRef(&random)
        let fresh = randomRef(&random)
        return CloneOp(
            action: split ? .split : .flag, device: device,
            laterIDFV: Identifier(kind: .idfv, value: UUID128(high: random.next() | 1, low: random.next())),
            appeared: HLCTimestamp(rawValue: random.next() >> 9), earlierSeen: HLCTimestamp(rawValue: random.next() >> 8),
            bundle: try BundleID(parsing: "com.v.app\(random.next() % 50)"),
            keychain: split ? Identifier(kind: .keychain, value: UUID128(high: random.next() | 1, low: random.next())) : nil,
            newDevice: split ? DeviceRef(id: fresh.id, created: fresh.created, origin: fresh.origin, vendor: device.vendor) : nil, decidedBy: NodeID(trusted: "node-\(random.next() % 7)"))
    }

    /// `ref` as a protobuf-c `DeviceRef` in `arena` (also the reference of `CodecRoundTripTests`).
    static func packedRef(_ ref: DeviceRef, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__DeviceRef> {
        var message = Registry__V1__DeviceRef()
        registry__v1__device_ref__init(&message)
        message.device_id = arena.bytes(ref.id.uuid)
        message.created_hlc = ref.created.rawValue
        message.origin_node_id = arena.string(ref.origin.value)
        message.vendor = arena.string(ref.vendor.name)
        return arena.new(message)
    }

    static func packed(_ op: CloneOp, action: UInt32? = nil) throws -> [UInt8] {
        try ForgetAndVendorRuleCodecTests().packed { operation, arena in
            var message = Registry__V1__CloneMark()
            registry__v1__clone_mark__init(&message)
            message.action = Registry__V1__CloneAction(rawValue: action ?? UInt32(op.action.rawValue))
            message.device = packedRef(op.device, in: arena)
            message.later_idfv = arena.bytes(op.laterIDFV.value)
            message.appeared_hlc = op.appeared.rawValue
            message.earlier_seen_hlc = op.earlierSeen.rawValue
            message.bundle_id = arena.string(op.bundle.value)
            if let keychain = op.keychain { message.keychain = arena.bytes(keychain.value) }
            if let newDevice = op.newDevice { message.new_device = packedRef(newDevice, in: arena) }
            message.decided_by = arena.string(op.decidedBy.value)
            operation.body_case = REGISTRY__V1__OPERATION__BODY_CLONE
            operation.clone = arena.new(message)
        }
    }

    @Test func aCloneIsWrittenAsProtobufCPacksItAndSurvivesASnapshotRecord() throws {
        var random = SplitMix64(seed: 6)
        for _ in 0..<200 {
            let op = try Self.randomClone(&random)
            let bytes = try Self.packed(op)
            #expect(OperationCodec.encode(.clone(op)) == bytes)
            #expect(try OperationCodec.decode(bytes) == .clone(op))
            var record = [UInt8]()
            SnapshotCodec.encode(.clone(op), into: &record)
            #expect(try record.withUnsafeBytes { try SnapshotCodec.decodeRecord($0) } == .clone(op))
        }
        let later = SnapshotRecord.laterIDFV(device: 7, claim: UUID128(high: 8, low: 9), appeared: HLCTimestamp(rawValue: 10))
        var record = [UInt8]()
        SnapshotCodec.encode(later, into: &record)
        #expect(try record.withUnsafeBytes { try SnapshotCodec.decodeRecord($0) } == later)
    }

    @Test func clonesThatBreakTheirShapeAreRefused() throws {
        var random = SplitMix64(seed: 7)
        var flag = try Self.randomClone(&random)
        while flag.action != .flag { flag = try Self.randomClone(&random) }
        var split = try Self.randomClone(&random)
        while split.action != .split { split = try Self.randomClone(&random) }
        #expect(throws: CodecError.invalidOperation("clone: action 3 is neither FLAG nor SPLIT")) { try OperationCodec.decode(try Self.packed(flag, action: 3)) }
        #expect(throws: CodecError.invalidOperation("clone: action 0 is neither FLAG nor SPLIT")) { try OperationCodec.decode(try Self.packed(flag, action: 0)) }
        // A split's fields on a flag, and a split without them.
        #expect(throws: CodecError.invalidOperation("clone: a flag names no keychain and no new device")) {
            try OperationCodec.decode(try Self.packed(split, action: 1))
        }
        #expect(throws: CodecError.invalidOperation("clone: a split's keychain must be 16 non-zero bytes")) {
            try OperationCodec.decode(try Self.packed(flag, action: 2))
        }
        // A split whose new device is another vendor's, or the device itself.
        let other = DeviceRef(id: split.newDevice!.id, created: split.newDevice!.created, origin: split.newDevice!.origin, vendor: Vendor(trusted: "com.elsewhere"))
        for newDevice in [other, split.device] {
            let odd = CloneOp(
                action: .split, device: split.device, laterIDFV: split.laterIDFV, appeared: split.appeared, earlierSeen: split.earlierSeen,
                bundle: split.bundle, keychain: split.keychain, newDevice: newDevice, decidedBy: split.decidedBy)
            #expect(throws: CodecError.invalidOperation("clone: a split's new device must be another device of the same vendor")) {
                try OperationCodec.decode(try Self.packed(odd))
            }
        }
        // An all-zero later IDFV.
        let cut = CloneOp(
            action: .flag, device: flag.device, laterIDFV: Identifier(kind: .idfv, value: UUID128(high: 0, low: 0)), appeared: flag.appeared,
            earlierSeen: flag.earlierSeen, bundle: flag.bundle, decidedBy: flag.decidedBy)
        #expect(throws: CodecError.invalidOperation("clone: the later IDFV must be 16 non-zero bytes")) {
            try OperationCodec.decode(OperationCodec.encode(.clone(cut)))
        }
    }

    @Test func theClonesRequestAndAnswerRoundTrip() throws {
        let request = ClientFrame(requestID: 3, body: .clones(vendor: "acme"))
        var buffer = ByteBuffer()
        try request.encode(into: &buffer)
        #expect(try ClientFrame(decoding: buffer) == request)
        let answer = ServerFrame(
            requestID: 3,
            body: .clones([
                SuspectedCloneMessage(
                    deviceID: "d", vendor: "acme", action: .split, laterIDFVAppearedMillis: 1, earlierIDFVSeenMillis: 2, bundleID: "com.acme.a",
                    newDeviceID: "n", decidedBy: "node-a"),
                SuspectedCloneMessage(
                    deviceID: "e", vendor: "acme", action: .flag, laterIDFVAppearedMillis: 3, earlierIDFVSeenMillis: 4, bundleID: "com.acme.b",
                    decidedBy: "node-b"),
            ]))
        buffer.clear()
        try answer.encode(into: &buffer)
        #expect(try ServerFrame(decoding: buffer) == answer)
    }
}
