import CRegistryProto
import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

/// The hand-written encoders of the forget and vendor-rule operations write what protobuf-c packs,
/// and the decoders refuse what breaks the rules.
@Suite struct ForgetAndVendorRuleCodecTests {
    func packed(_ fill: (inout Registry__V1__Operation, CArena) -> Void) throws -> [UInt8] {
        let arena = CArena()
        var operation = Registry__V1__Operation()
        registry__v1__operation__init(&operation)
        fill(&operation, arena)
        var buffer = ByteBuffer()
        try withExtendedLifetime(arena) { try ProtobufC.pack(&operation, into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    @Test func aForgetIsWrittenAsProtobufCPacksIt() throws {
        var random = SplitMix64(seed: 4)
        for _ in 0..<50 {
            let op = ForgetOp(device: DeviceID(UUID128(high: random.next(), low: random.next())), vendor: Vendor(trusted: "com.v\(random.next() % 99)"))
            let bytes = try packed { operation, arena in
                var message = Registry__V1__Forget()
                registry__v1__forget__init(&message)
                message.device_id = arena.bytes(op.device.uuid)
                message.vendor = arena.string(op.vendor.name)
                operation.body_case = REGISTRY__V1__OPERATION__BODY_FORGET
                operation.forget = arena.new(message)
            }
            #expect(OperationCodec.encode(.forget(op)) == bytes)
            #expect(try OperationCodec.decode(bytes) == .forget(op))
        }
        #expect(throws: CodecError.invalidOperation("forget: the device ID must be 16 bytes")) { try OperationCodec.decode([0x22, 0x00]) }
    }

    static func randomChange(_ random: inout SplitMix64) throws -> VendorRuleChange {
        let kind = [VendorRuleChange.Kind.seed, .set, .remove][Int(random.next() % 3)]
        let prefixes = (0..<(1 + Int(random.next() % 3))).map { _ in "com.p\(random.next() % 1_000)" }
        let name = random.next() % 2 == 0 ? "vendor-\(random.next() % 50)" : prefixes[0]
        let policy = try BindingPolicy(
            maxDevices: 1 + Int(random.next() % 1_000), activeWithinDays: random.next() % 2 == 0 ? nil : 1 + Int(random.next() % 3_650),
            pastLimit: random.next() % 2 == 0 ? .reject : .replace)
        // A third of the rules keep the default clone policy, which is written as nothing.
        let clones = random.next() % 3 == 0 ? .default
            : try ClonePolicy(action: [ClonePolicy.Action.flag, .split, .off][Int(random.next() % 3)], windowDays: 1 + Int(random.next() % 3_650))
        let rule = kind == .remove ? nil : try VendorRule(name: name, prefixes: Array(Set(prefixes)).sorted(), binding: policy, clones: clones)
        // An operator's change may carry a move; a seed never does.
        let move = kind == .seed || random.next() % 2 == 0 ? nil : VendorMove(from: prefixes + ["moved-\(random.next() % 9)"], into: name)
        return VendorRuleChange(
            kind: kind, name: rule?.name ?? name, rule: rule, time: HLCTimestamp(rawValue: random.next() >> (random.next() % 64)),
            origin: NodeID(trusted: "node-\(random.next() % 10)"), move: move)
    }

    @Test func aVendorRuleChangeIsWrittenAsProtobufCPacksItAndSurvivesASnapshotRecord() throws {
        var random = SplitMix64(seed: 5)
        for _ in 0..<200 {
            let change = try Self.randomChange(&random)
            let bytes = try packed { operation, arena in
                var message = Registry__V1__VendorRuleChange()
                registry__v1__vendor_rule_change__init(&message)
                message.kind = Registry__V1__VendorRuleChangeKind(rawValue: UInt32(change.kind.rawValue))
                message.name = arena.string(change.name)
                if let rule = change.rule {
                    (message.n_prefixes, message.prefixes) = arena.strings(rule.prefixes)
                    message.max_devices = UInt32(rule.binding.maxDevices)
                    message.active_within_days = UInt32(rule.binding.activeWithinDays ?? 0)
                    message.past_limit = Registry__V1__BindingPastLimit(rawValue: UInt32(VendorRuleCodec.pastLimit(rule.binding.pastLimit)))
                    if rule.clones != .default {
                        message.clone_action = Registry__V1__CloneAction(rawValue: UInt32(rule.clones.wireAction))
                        message.clone_window_days = UInt32(rule.clones.windowDays)
                    }
                }
                message.at_hlc = change.time.rawValue
                message.origin_node_id = arena.string(change.origin.value)
                if let move = change.move {
                    (message.n_moved, message.moved) = arena.strings(move.from)
                    message.moved_into = arena.string(move.into)
                }
                operation.body_case = REGISTRY__V1__OPERATION__BODY_VENDOR_RULE
                operation.vendor_rule = arena.new(message)
            }
            #expect(OperationCodec.encode(.vendorRule(change)) == bytes)
            #expect(try OperationCodec.decode(bytes) == .vendorRule(change))
            var record = [UInt8]()
            SnapshotCodec.encode(.vendorRule(change), into: &record)
            #expect(try record.withUnsafeBytes { try SnapshotCodec.decodeRecord($0) } == .vendorRule(change))
        }
    }

    @Test func vendorRuleChangesThatBreakTheRulesAreRefused() throws {
        func encoded(kind: UInt32, name: String, prefixes: [String], maxDevices: UInt32, moved: [String] = [], into: String = "") throws -> [UInt8] {
            try packed { operation, arena in
                var message = Registry__V1__VendorRuleChange()
                registry__v1__vendor_rule_change__init(&message)
                message.kind = Registry__V1__VendorRuleChangeKind(rawValue: kind)
                message.name = arena.string(name)
                (message.n_prefixes, message.prefixes) = arena.strings(prefixes)
                (message.n_moved, message.moved) = arena.strings(moved)
                message.moved_into = arena.string(into)
                message.max_devices = maxDevices
                message.origin_node_id = arena.string("node-a")
                operation.body_case = REGISTRY__V1__OPERATION__BODY_VENDOR_RULE
                operation.vendor_rule = arena.new(message)
            }
        }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 0, name: "acme", prefixes: ["com.acme"], maxDevices: 1)) }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 2, name: "acme", prefixes: ["com"], maxDevices: 1)) }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 2, name: "acme", prefixes: ["com.acme"], maxDevices: 0)) }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 2, name: "Bad Name", prefixes: ["com.acme"], maxDevices: 1)) }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 3, name: "", prefixes: [], maxDevices: 0)) }
        // Moves: a seed's, one into nowhere, a name twice, a name that is no vendor name.
        #expect(throws: CodecError.self) {
            try OperationCodec.decode(try encoded(kind: 1, name: "acme", prefixes: ["com.acme"], maxDevices: 1, moved: ["com.acme"], into: "acme"))
        }
        #expect(throws: CodecError.self) { try OperationCodec.decode(try encoded(kind: 3, name: "acme", prefixes: [], maxDevices: 0, moved: ["acme"])) }
        #expect(throws: CodecError.self) {
            try OperationCodec.decode(try encoded(kind: 3, name: "acme", prefixes: [], maxDevices: 0, moved: ["acme", "acme"], into: "com.acme"))
        }
        #expect(throws: CodecError.self) {
            try OperationCodec.decode(try encoded(kind: 3, name: "acme", prefixes: [], maxDevices: 0, moved: ["Com Acme"], into: "com.acme"))
        }
        // A name another node would write lower-case.
        #expect(throws: CodecError.invalidOperation("vendor rule \"Acme\": invalid vendor: vendor name \"Acme\" is not in its normal form")) {
            try OperationCodec.decode(try encoded(kind: 2, name: "Acme", prefixes: ["com.acme"], maxDevices: 1))
        }
        // Clone policies out of range.
        let badClones = try packed { operation, arena in
            var message = Registry__V1__VendorRuleChange()
            registry__v1__vendor_rule_change__init(&message)
            message.kind = REGISTRY__V1__VENDOR_RULE_CHANGE_KIND__VENDOR_RULE_CHANGE_KIND_SET
            message.name = arena.string("acme")
            (message.n_prefixes, message.prefixes) = arena.strings(["acme.app"])
            message.max_devices = 1
            message.clone_action = Registry__V1__CloneAction(rawValue: 9)
            message.origin_node_id = arena.string("node-a")
            operation.body_case = REGISTRY__V1__OPERATION__BODY_VENDOR_RULE
            operation.vendor_rule = arena.new(message)
        }
        #expect(throws: CodecError.invalidOperation("vendor rule \"acme\": invalid clone policy: clone action 9 is not flag (1), split (2) or off (3)")) {
            try OperationCodec.decode(badClones)
        }
        guard case .vendorRule(let removal) = try OperationCodec.decode(try encoded(kind: 3, name: "acme", prefixes: [], maxDevices: 0)) else {
            Issue.record("a removal did not decode")
            return
        }
        #expect(removal.kind == .remove && removal.name == "acme" && removal.rule == nil)
    }
}
