import CRegistryProto
import RegistryCore

/// Converts vendor rule changes between their Swift form and `registry.v1.VendorRuleChange`
/// (the log's and the replication stream's), and policies between their Swift and wire forms.
enum VendorRuleCodec {
    /// Field numbers of `VendorRuleChange`, from `Protos/registry/v1/oplog.proto`.
    enum Field {
        static let kind: UInt64 = 1, name: UInt64 = 2, prefixes: UInt64 = 3, maxDevices: UInt64 = 4, activeWithinDays: UInt64 = 5
        static let pastLimit: UInt64 = 6, atHLC: UInt64 = 7, origin: UInt64 = 8, moved: UInt64 = 9, movedInto: UInt64 = 10
        static let cloneAction: UInt64 = 11, cloneWindowDays: UInt64 = 12
    }

    /// The encoded size of `change`'s fields.
    static func size(_ change: VendorRuleChange) -> Int {
        var total = ProtobufWriter.int32Size(Field.kind, Int32(change.kind.rawValue)) + ProtobufWriter.stringSize(Field.name, change.name)
        if let rule = change.rule {
            for prefix in rule.prefixes { total += ProtobufWriter.stringSize(Field.prefixes, prefix) }
            total += ProtobufWriter.uint64Size(Field.maxDevices, UInt64(rule.binding.maxDevices))
            total += ProtobufWriter.uint64Size(Field.activeWithinDays, UInt64(rule.binding.activeWithinDays ?? 0))
            total += ProtobufWriter.int32Size(Field.pastLimit, pastLimit(rule.binding.pastLimit))
        }
        if let move = change.move {
            for name in move.from { total += ProtobufWriter.stringSize(Field.moved, name) }
            total += ProtobufWriter.stringSize(Field.movedInto, move.into)
        }
        if let clones = change.rule?.clones, clones != .default {
            total += ProtobufWriter.int32Size(Field.cloneAction, Int32(clones.wireAction))
            total += ProtobufWriter.uint64Size(Field.cloneWindowDays, UInt64(clones.windowDays))
        }
        return total + ProtobufWriter.uint64Size(Field.atHLC, change.time.rawValue) + ProtobufWriter.stringSize(Field.origin, change.origin.value)
    }

    static func write(_ change: VendorRuleChange, to writer: inout ProtobufWriter) {
        writer.int32(Field.kind, Int32(change.kind.rawValue))
        writer.string(Field.name, change.name)
        if let rule = change.rule {
            // Prefixes are never empty, so each is written as protobuf-c packs it.
            for prefix in rule.prefixes { writer.string(Field.prefixes, prefix) }
            writer.uint64(Field.maxDevices, UInt64(rule.binding.maxDevices))
            writer.uint64(Field.activeWithinDays, UInt64(rule.binding.activeWithinDays ?? 0))
            writer.int32(Field.pastLimit, pastLimit(rule.binding.pastLimit))
        }
        writer.uint64(Field.atHLC, change.time.rawValue)
        writer.string(Field.origin, change.origin.value)
        if let move = change.move {
            // Names are never empty, so each is written as protobuf-c packs it.
            for name in move.from { writer.string(Field.moved, name) }
            writer.string(Field.movedInto, move.into)
        }
        // The default policy is left out, so that a rule reads as it did before clone policies.
        if let clones = change.rule?.clones, clones != .default {
            writer.int32(Field.cloneAction, Int32(clones.wireAction))
            writer.uint64(Field.cloneWindowDays, UInt64(clones.windowDays))
        }
    }

    static func change(_ message: Registry__V1__VendorRuleChange) throws(CodecError) -> VendorRuleChange {
        guard let kind = VendorRuleChange.Kind(rawValue: UInt8(clamping: message.kind.rawValue)), message.kind.rawValue > 0 else {
            throw .invalidOperation("vendor rule: unknown kind \(message.kind.rawValue)")
        }
        let name = CRead.string(message.name)
        let origin: NodeID
        do {
            origin = try NodeID(CRead.string(message.origin_node_id))
        } catch {
            throw .invalidOperation("vendor rule: \(error)")
        }
        do throws(IdentityError) {
            return try VendorRuleChange.reading(
                kind: kind, name: name, prefixes: CRead.strings(message.n_prefixes, message.prefixes), maxDevices: Int(message.max_devices),
                activeWithinDays: Int(message.active_within_days), pastLimit: try pastLimit(message.past_limit),
                time: HLCTimestamp(rawValue: message.at_hlc), origin: origin, moved: CRead.strings(message.n_moved, message.moved),
                movedInto: CRead.string(message.moved_into), cloneAction: UInt8(clamping: message.clone_action.rawValue),
                cloneWindowDays: Int(message.clone_window_days))
        } catch {
            throw .invalidOperation("vendor rule \(name.debugDescription): \(error)")
        }
    }

    static func pastLimit(_ value: BindingPolicy.PastLimit) -> Int32 {
        switch value {
        case .reject: return Int32(REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_REJECT.rawValue)
        case .replace: return Int32(REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_REPLACE.rawValue)
        }
    }

    static func pastLimit(_ value: Registry__V1__BindingPastLimit) throws(IdentityError) -> BindingPolicy.PastLimit {
        switch value {
        case REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_REJECT, REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_UNSPECIFIED:
            return .reject
        case REGISTRY__V1__BINDING_PAST_LIMIT__BINDING_PAST_LIMIT_REPLACE: return .replace
        default: throw .invalidBindingPolicy("unknown past-limit action \(value.rawValue)")
        }
    }
}
