import CProtobufC
import CRegistryProto
import NIOCore
import RegistryCore

/// Encodes log operations as `registry.v1.Operation` for storage and replication, and decodes
/// them back, re-checking the identity rules so a corrupt or hostile entry is refused.
///
/// Encoding writes the wire format directly (``ProtobufWriter``): the log writer encodes every
/// operation it commits, and building a protobuf-c message graph for each, then sizing and
/// packing it through protobuf-c's descriptors, took a quarter of that thread's CPU. The bytes
/// are the ones protobuf-c packs, field for field (`CodecRoundTripTests` compares them over
/// seeded random operations). Decoding goes through protobuf-c.
public enum OperationCodec {
    public static func encode(_ operation: Operation) -> [UInt8] {
        var bytes = [UInt8]()
        encode(operation, appendingTo: &bytes)
        return bytes
    }

    /// Appends `operation`, encoded as `registry.v1.Operation`, to `bytes`.
    public static func encode(_ operation: Operation, appendingTo bytes: inout [UInt8]) {
        switch operation {
        case .registration(let op):
            append(field: Field.registration, length: size(op), to: &bytes) { write(op, to: &$0) }
        case .membership(let op):
            let length = ProtobufWriter.stringSize(Field.nodeID, op.node.text) + ProtobufWriter.stringSize(Field.address, op.address)
                + (op.removed ? ProtobufWriter.uint64Size(Field.removed, 1) : 0) + ProtobufWriter.uint64Size(Field.atHLC, op.at.rawValue)
            append(field: Field.membership, length: length, to: &bytes) { writer in
                writer.string(Field.nodeID, op.node.text)
                writer.string(Field.address, op.address)
                if op.removed { writer.uint64(Field.removed, 1) }
                writer.uint64(Field.atHLC, op.at.rawValue)
            }
        case .binding(let change):
            let length = ProtobufWriter.int32Size(Field.bindingKind, Int32(change.kind.rawValue))
                + ProtobufWriter.stringSize(Field.bindingVendor, change.vendor.text) + ProtobufWriter.uuidSize(Field.account)
                + ProtobufWriter.uuidSize(Field.bindingDevice) + ProtobufWriter.uint64Size(Field.bindingAtHLC, change.time.rawValue)
                + ProtobufWriter.stringSize(Field.bindingOrigin, change.origin.text)
            append(field: Field.binding, length: length, to: &bytes) { writer in
                writer.int32(Field.bindingKind, Int32(change.kind.rawValue))
                writer.string(Field.bindingVendor, change.vendor.text)
                writer.uuid(Field.account, change.account)
                writer.uuid(Field.bindingDevice, change.device.uuid)
                writer.uint64(Field.bindingAtHLC, change.time.rawValue)
                writer.string(Field.bindingOrigin, change.origin.text)
            }
        case .forget(let op):
            let length = ProtobufWriter.uuidSize(Field.forgetDevice) + ProtobufWriter.stringSize(Field.forgetVendor, op.vendor.text)
            append(field: Field.forget, length: length, to: &bytes) { writer in
                writer.uuid(Field.forgetDevice, op.device.uuid)
                writer.string(Field.forgetVendor, op.vendor.text)
            }
        case .vendorRule(let change):
            append(field: Field.vendorRule, length: VendorRuleCodec.size(change), to: &bytes) { VendorRuleCodec.write(change, to: &$0) }
        case .clone(let op):
            append(field: Field.clone, length: size(op), to: &bytes) { write(op, to: &$0) }
        }
    }

    /// Appends field `field` of `Operation`, a message of `length` bytes that `body` writes.
    private static func append(field: UInt64, length: Int, to bytes: inout [UInt8], _ body: (inout ProtobufWriter) -> Void) {
        let total = ProtobufWriter.delimitedSize(field, length: length)
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: total))
        bytes.withUnsafeMutableBufferPointer { buffer in
            var writer = ProtobufWriter(at: buffer.baseAddress! + start)
            writer.header(field, length: length)
            body(&writer)
            precondition(writer.cursor == buffer.baseAddress! + start + total, "an operation's size was misjudged")
        }
    }

    /// Field numbers, from `Protos/registry/v1/oplog.proto`.
    private enum Field {
        /// `Operation.registration`, `.membership`, `.binding`, `.forget`, `.vendor_rule`.
        static let registration: UInt64 = 1, membership: UInt64 = 2, binding: UInt64 = 3, forget: UInt64 = 4, vendorRule: UInt64 = 5
        static let clone: UInt64 = 6
        /// `CloneMark`.
        static let cloneAction: UInt64 = 1, cloneDevice: UInt64 = 2, laterIDFV: UInt64 = 3, appearedHLC: UInt64 = 4
        static let earlierSeenHLC: UInt64 = 5, cloneBundle: UInt64 = 6, keychain: UInt64 = 7, newDevice: UInt64 = 8, decidedBy: UInt64 = 9
        /// `Forget`.
        static let forgetDevice: UInt64 = 1, forgetVendor: UInt64 = 2
        /// `BindingChange`.
        static let bindingKind: UInt64 = 1, bindingVendor: UInt64 = 2, account: UInt64 = 3, bindingDevice: UInt64 = 4
        static let bindingAtHLC: UInt64 = 5, bindingOrigin: UInt64 = 6
        /// `MembershipChange`.
        static let nodeID: UInt64 = 1, address: UInt64 = 2, removed: UInt64 = 3, atHLC: UInt64 = 4
        /// `RegistrationOp`.
        static let device: UInt64 = 1, bundleID: UInt64 = 2, claims: UInt64 = 3, merged: UInt64 = 4, seenHLC: UInt64 = 5
        /// `ClaimedIdentifier`.
        static let kind: UInt64 = 1, value: UInt64 = 2
        /// `DeviceRef`.
        static let deviceID: UInt64 = 1, createdHLC: UInt64 = 2, originNodeID: UInt64 = 3, vendor: UInt64 = 4
    }

    private static func size(_ op: RegistrationOp) -> Int {
        var total = ProtobufWriter.delimitedSize(Field.device, length: size(op.device))
        total += ProtobufWriter.stringSize(Field.bundleID, op.bundle.text)
        for claim in op.claims { total += ProtobufWriter.delimitedSize(Field.claims, length: size(claim)) }
        for ref in op.merged { total += ProtobufWriter.delimitedSize(Field.merged, length: size(ref)) }
        return total + ProtobufWriter.uint64Size(Field.seenHLC, op.seen.rawValue)
    }

    private static func write(_ op: RegistrationOp, to writer: inout ProtobufWriter) {
        write(op.device, field: Field.device, to: &writer)
        writer.string(Field.bundleID, op.bundle.text)
        for claim in op.claims {
            writer.header(Field.claims, length: size(claim))
            writer.int32(Field.kind, claim.kind.rawValue)
            writer.uuid(Field.value, claim.value)
        }
        for ref in op.merged { write(ref, field: Field.merged, to: &writer) }
        writer.uint64(Field.seenHLC, op.seen.rawValue)
    }

    private static func size(_ op: CloneOp) -> Int {
        var total = ProtobufWriter.int32Size(Field.cloneAction, Int32(op.action.rawValue))
        total += ProtobufWriter.delimitedSize(Field.cloneDevice, length: size(op.device)) + ProtobufWriter.uuidSize(Field.laterIDFV)
        total += ProtobufWriter.uint64Size(Field.appearedHLC, op.appeared.rawValue) + ProtobufWriter.uint64Size(Field.earlierSeenHLC, op.earlierSeen.rawValue)
        total += ProtobufWriter.stringSize(Field.cloneBundle, op.bundle.text)
        if op.keychain != nil { total += ProtobufWriter.uuidSize(Field.keychain) }
        if let newDevice = op.newDevice { total += ProtobufWriter.delimitedSize(Field.newDevice, length: size(newDevice)) }
        return total + ProtobufWriter.stringSize(Field.decidedBy, op.decidedBy.value)
    }

    private static func write(_ op: CloneOp, to writer: inout ProtobufWriter) {
        writer.int32(Field.cloneAction, Int32(op.action.rawValue))
        write(op.device, field: Field.cloneDevice, to: &writer)
        writer.uuid(Field.laterIDFV, op.laterIDFV.value)
        writer.uint64(Field.appearedHLC, op.appeared.rawValue)
        writer.uint64(Field.earlierSeenHLC, op.earlierSeen.rawValue)
        writer.string(Field.cloneBundle, op.bundle.text)
        if let keychain = op.keychain { writer.uuid(Field.keychain, keychain.value) }
        if let newDevice = op.newDevice { write(newDevice, field: Field.newDevice, to: &writer) }
        writer.string(Field.decidedBy, op.decidedBy.value)
    }

    private static func size(_ claim: Identifier) -> Int {
        ProtobufWriter.int32Size(Field.kind, claim.kind.rawValue) + ProtobufWriter.uuidSize(Field.value)
    }

    private static func size(_ ref: DeviceRef) -> Int {
        ProtobufWriter.uuidSize(Field.deviceID) + ProtobufWriter.uint64Size(Field.createdHLC, ref.created.rawValue)
            + ProtobufWriter.stringSize(Field.originNodeID, ref.origin.text)
            + ProtobufWriter.stringSize(Field.vendor, ref.vendor.text)
    }

    private static func write(_ ref: DeviceRef, field: UInt64, to writer: inout ProtobufWriter) {
        writer.header(field, length: size(ref))
        writer.uuid(Field.deviceID, ref.id.uuid)
        writer.uint64(Field.createdHLC, ref.created.rawValue)
        writer.string(Field.originNodeID, ref.origin.text)
        writer.string(Field.vendor, ref.vendor.text)
    }

    public static func decode(_ bytes: ByteBuffer) throws(CodecError) -> Operation {
        // Registrations, nearly every operation, are read directly; anything unusual, and every
        // other kind, through protobuf-c.
        if let registration = bytes.withUnsafeReadableBytes({ RegistrationOpReader.operation($0) }) { return registration }
        return try decodedByProtobufC(bytes)
    }

    /// `bytes` as protobuf-c unpacks them: every operation the direct reader leaves.
    static func decodedByProtobufC(_ bytes: ByteBuffer) throws(CodecError) -> Operation {
        try ProtobufC.withUnpacked(bytes, name: "registry.v1.Operation", unpack: registry__v1__operation__unpack) {
            (message: Registry__V1__Operation) throws(CodecError) -> Operation in
            if message.body_case == REGISTRY__V1__OPERATION__BODY_MEMBERSHIP, let change = message.membership?.pointee {
                let node: NodeID
                do {
                    node = try NodeID(CRead.string(change.node_id))
                } catch {
                    throw .invalidOperation("membership: \(error)")
                }
                return .membership(
                    MembershipOp(node: node, address: CRead.string(change.address), removed: change.removed != 0, at: HLCTimestamp(rawValue: change.at_hlc)))
            }
            if message.body_case == REGISTRY__V1__OPERATION__BODY_BINDING, let change = message.binding?.pointee {
                return .binding(try bindingChange(change))
            }
            if message.body_case == REGISTRY__V1__OPERATION__BODY_FORGET, let forget = message.forget?.pointee {
                guard let device = CRead.uuid(forget.device_id) else { throw .invalidOperation("forget: the device ID must be 16 bytes") }
                let vendor = CRead.string(forget.vendor)
                guard !vendor.isEmpty else { throw .invalidOperation("forget: no vendor") }
                return .forget(ForgetOp(device: DeviceID(device), vendor: Vendor(trusted: vendor)))
            }
            if message.body_case == REGISTRY__V1__OPERATION__BODY_VENDOR_RULE, let change = message.vendor_rule?.pointee {
                return .vendorRule(try VendorRuleCodec.change(change))
            }
            if message.body_case == REGISTRY__V1__OPERATION__BODY_CLONE, let mark = message.clone?.pointee {
                return .clone(try cloneOp(mark))
            }
            guard message.body_case == REGISTRY__V1__OPERATION__BODY_REGISTRATION, let op = message.registration?.pointee else {
                throw .invalidOperation("unknown operation kind \(message.body_case.rawValue)")
            }
            let device = try deviceRef(op.device)
            let bundle: BundleID
            do {
                bundle = try BundleID(parsing: CRead.string(op.bundle_id))
            } catch {
                throw .invalidOperation("\(error)")
            }
            // A registration presents at most one identifier of each kind, and claims some of them.
            guard op.n_claims <= IdentifierList.capacity else {
                throw .invalidOperation("a registration claims at most \(IdentifierList.capacity) identifiers, not \(op.n_claims)")
            }
            let claims = try CRead.messages(op.n_claims, op.claims) { (claim) throws(CodecError) -> Identifier in
                guard let kind = IdentifierKind(rawValue: Int32(truncatingIfNeeded: claim.kind.rawValue)),
                    let value = CRead.uuid(claim.value), !value.isZero
                else { throw .invalidOperation("a claim is not a known kind with a non-zero 16-byte value") }
                return Identifier(kind: kind, value: value)
            }
            let merged = try CRead.messages(op.n_merged, op.merged) { (ref) throws(CodecError) -> DeviceRef in
                var copy = ref
                return try deviceRef(&copy)
            }
            return .registration(
                RegistrationOp(
                    device: device, bundle: bundle, claims: IdentifierList(claims), merged: merged, seen: HLCTimestamp(rawValue: op.seen_hlc)))
        }
    }

    public static func decode(_ bytes: some RandomAccessCollection<UInt8>) throws(CodecError) -> Operation {
        var decoder = OperationDecoder(remembering: 1)
        return try decoder.decode(bytes)
    }

    /// Decodes bytes in place, such as a journal record's payload inside its segment.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(CodecError) -> Operation {
        var decoder = OperationDecoder(remembering: 1)
        return try decoder.decode(bytes)
    }

    private static func cloneOp(_ mark: Registry__V1__CloneMark) throws(CodecError) -> CloneOp {
        let action: CloneOp.Action
        switch mark.action {
        case REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_FLAG: action = .flag
        case REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_SPLIT: action = .split
        default: throw .invalidOperation("clone: action \(mark.action.rawValue) is neither FLAG nor SPLIT")
        }
        let device = try deviceRef(mark.device)
        guard let later = CRead.uuid(mark.later_idfv), !later.isZero else { throw .invalidOperation("clone: the later IDFV must be 16 non-zero bytes") }
        let bundle: BundleID
        do {
            bundle = try BundleID(parsing: CRead.string(mark.bundle_id))
        } catch {
            throw .invalidOperation("clone: \(error)")
        }
        var (keychain, newDevice): (Identifier?, DeviceRef?) = (nil, nil)
        if action == .split {
            guard let value = CRead.uuid(mark.keychain), !value.isZero else { throw .invalidOperation("clone: a split's keychain must be 16 non-zero bytes") }
            keychain = Identifier(kind: .keychain, value: value)
            newDevice = try deviceRef(mark.new_device)
            guard newDevice!.vendor == device.vendor, newDevice!.id != device.id else {
                throw .invalidOperation("clone: a split's new device must be another device of the same vendor")
            }
        } else if mark.keychain.len != 0 || mark.new_device != nil {
            throw .invalidOperation("clone: a flag names no keychain and no new device")
        }
        let decidedBy: NodeID
        do {
            decidedBy = try NodeID(CRead.string(mark.decided_by))
        } catch {
            throw .invalidOperation("clone: \(error)")
        }
        return CloneOp(
            action: action, device: device, laterIDFV: Identifier(kind: .idfv, value: later), appeared: HLCTimestamp(rawValue: mark.appeared_hlc),
            earlierSeen: HLCTimestamp(rawValue: mark.earlier_seen_hlc), bundle: bundle, keychain: keychain, newDevice: newDevice, decidedBy: decidedBy)
    }

    private static func bindingChange(_ change: Registry__V1__BindingChange) throws(CodecError) -> BindingChange {
        guard (1...2).contains(change.kind.rawValue), let kind = BindingChange.Kind(rawValue: UInt8(change.kind.rawValue)) else { throw .invalidOperation("binding: unknown kind \(change.kind.rawValue)") }
        let vendor = CRead.string(change.vendor)
        guard !vendor.isEmpty else { throw .invalidOperation("binding: no vendor") }
        guard let account = CRead.uuid(change.account), let device = CRead.uuid(change.device_id) else {
            throw .invalidOperation("binding: the account and the device ID must be 16 bytes each")
        }
        let origin: NodeID
        do {
            origin = try NodeID(CRead.string(change.origin_node_id))
        } catch {
            throw .invalidOperation("binding: \(error)")
        }
        return BindingChange(
            kind: kind, vendor: Vendor(trusted: vendor), account: account, device: DeviceID(device),
            time: HLCTimestamp(rawValue: change.at_hlc), origin: origin)
    }

    private static func deviceRef(_ pointer: UnsafeMutablePointer<Registry__V1__DeviceRef>?) throws(CodecError) -> DeviceRef {
        guard let ref = pointer?.pointee else { throw .invalidOperation("an operation names no device") }
        guard let id = CRead.uuid(ref.device_id) else {
            throw .invalidOperation("a device ID is not 16 bytes")
        }
        let origin: NodeID
        do {
            origin = try NodeID(CRead.string(ref.origin_node_id))
        } catch {
            throw .invalidOperation("\(error)")
        }
        let vendor = CRead.string(ref.vendor)
        guard !vendor.isEmpty else { throw .invalidOperation("a device has no vendor") }
        return DeviceRef(
            id: DeviceID(id), created: HLCTimestamp(rawValue: ref.created_hlc), origin: origin, vendor: Vendor(trusted: vendor))
    }

    private static func deviceRef(_ ref: inout Registry__V1__DeviceRef) throws(CodecError) -> DeviceRef {
        try withUnsafeMutablePointer(to: &ref) { (pointer) throws(CodecError) -> DeviceRef in try deviceRef(pointer) }
    }
}
