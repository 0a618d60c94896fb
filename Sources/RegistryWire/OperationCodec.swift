import CProtobufC
import CRegistryProto
import NIOCore
import RegistryCore

/// Encodes log operations as `registry.v1.Operation` for storage and replication, and decodes
/// them back, re-checking the identity rules so a corrupt or hostile entry is refused.
public enum OperationCodec {
    /// `operation` as a protobuf-c message whose fields all live in `arena`.
    static func build(_ operation: Operation, in arena: CArena) -> Registry__V1__Operation {
        var message = Registry__V1__Operation()
        registry__v1__operation__init(&message)
        switch operation {
        case .registration(let op):
            var registration = Registry__V1__RegistrationOp()
            registry__v1__registration_op__init(&registration)
            registration.device = arena.deviceRef(op.device)
            registration.bundle_id = arena.string(op.bundle.value)
            registration.n_claims = op.claims.count
            registration.claims = arena.array(count: op.claims.count) { index in
                var message = Registry__V1__ClaimedIdentifier()
                registry__v1__claimed_identifier__init(&message)
                message.kind = Registry__V1__IdentifierKind(rawValue: .init(truncatingIfNeeded: op.claims[index].kind.rawValue))
                message.value = arena.bytes(op.claims[index].value)
                return arena.new(message)
            }
            registration.n_merged = op.merged.count
            registration.merged = arena.array(count: op.merged.count) { arena.deviceRef(op.merged[$0]) }
            registration.seen_hlc = op.seen.rawValue
            message.body_case = REGISTRY__V1__OPERATION__BODY_REGISTRATION
            message.registration = arena.new(registration)
        }
        return message
    }

    public static func encode(_ operation: Operation) throws(CodecError) -> [UInt8] {
        var bytes = [UInt8]()
        try OperationEncoder().encode(operation, appendingTo: &bytes)
        return bytes
    }

    public static func decode(_ bytes: ByteBuffer) throws(CodecError) -> Operation {
        try ProtobufC.withUnpacked(bytes, name: "registry.v1.Operation", unpack: registry__v1__operation__unpack) {
            (message: Registry__V1__Operation) throws(CodecError) -> Operation in
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
                    device: device, bundle: bundle, claims: claims, merged: merged, seen: HLCTimestamp(rawValue: op.seen_hlc)))
        }
    }

    public static func decode(_ bytes: [UInt8]) throws(CodecError) -> Operation {
        try decode(ByteBuffer(bytes: bytes))
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

extension CArena {
    func deviceRef(_ ref: DeviceRef) -> UnsafeMutablePointer<Registry__V1__DeviceRef>? {
        var message = Registry__V1__DeviceRef()
        registry__v1__device_ref__init(&message)
        message.device_id = bytes(ref.id.uuid)
        message.created_hlc = ref.created.rawValue
        message.origin_node_id = string(ref.origin.value)
        message.vendor = string(ref.vendor.name)
        return new(message)
    }
}

/// Encodes log operations one after another, reusing one arena, straight onto the end of a byte
/// array: the log writer's path, where a fresh arena and buffer per operation cost more than
/// the packing itself.
///
/// Not thread-safe: one owner uses it at a time.
public final class OperationEncoder {
    private let arena = CArena()

    public init() {}

    /// Appends `operation`, encoded as `registry.v1.Operation`, to `bytes`.
    public func encode(_ operation: Operation, appendingTo bytes: inout [UInt8]) throws(CodecError) {
        arena.reset()
        var message = OperationCodec.build(operation, in: arena)
        try ProtobufC.pack(&message, appendingTo: &bytes)
    }
}
