import RegistryCore

/// Decodes journal and replication entries that hold a registration, an `Operation` whose body
/// is a `RegistrationOp`, without protobuf-c: they are nearly every operation a node replays at
/// start-up or applies from a peer, and protobuf-c's generic unpacking and the copy out of its
/// message graph were most of decoding one (docs/performance.md, "Replaying registrations").
///
/// It reads the usual shape only, as ``RegisterRequestsReader`` does: a field the schema does not
/// have is skipped, and anything else unusual (another body, a sub-message or a string twice, a
/// wire type other than the field's, a length past the end, a value the codec would refuse) gives
/// nil, and ``OperationCodec/decode(_:)-(ByteBuffer)`` hands the bytes to protobuf-c, whose rules
/// and errors decide. On what it does read, the two agree (`RegistrationOpReaderTests` compares
/// them over seeded random operations and mutations of them).
///
/// One reader can read many operations in turn, and remembers the origins, vendors and bundle
/// IDs it made (``TextMemo``): an ``OperationDecoder`` keeps one for a whole replay or batch.
struct RegistrationOpReader {
    private var origins: TextMemo<NodeID>
    private var vendors: TextMemo<Vendor>
    private var bundles: TextMemo<BundleID>

    /// A reader that remembers up to about `texts` bundle IDs and vendors (1: the last of each,
    /// which allocates nothing, for one operation).
    init(remembering texts: Int) {
        origins = TextMemo(slots: 1)
        vendors = TextMemo(slots: texts)
        bundles = TextMemo(slots: texts)
    }

    /// The registration `bytes` holds, or nil when protobuf-c is to decode them.
    static func operation(_ bytes: UnsafeRawBufferPointer) -> Operation? {
        var reader = RegistrationOpReader(remembering: 1)
        return reader.operation(bytes)
    }

    /// The registration `bytes` holds, or nil when protobuf-c is to decode them.
    mutating func operation(_ bytes: UnsafeRawBufferPointer) -> Operation? {
        var reader = ProtobufReader(bytes)
        var registration: Operation?
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard registration == nil, let body = reader.delimited(), let op = registrationOp(body) else { return nil }
                registration = .registration(op)
            case (1...6, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return registration
    }

    private mutating func registrationOp(_ bytes: UnsafeRawBufferPointer) -> RegistrationOp? {
        var reader = ProtobufReader(bytes)
        var device: DeviceRef?
        var bundle: BundleID?
        var claims = IdentifierList()
        var merged = [DeviceRef]()
        var seen: UInt64 = 0
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard device == nil, let body = reader.delimited(), let ref = deviceRef(body) else { return nil }
                device = ref
            case (2, .lengthDelimited):
                guard bundle == nil, let text = reader.delimited(), let parsed = bundles.value(text, make: { try? BundleID(parsing: $0) })
                else { return nil }
                bundle = parsed
            case (3, .lengthDelimited):
                // More claims than a registration can make: protobuf-c's path refuses them.
                guard !claims.isFull, let body = reader.delimited(), let claim = Self.claim(body) else { return nil }
                claims.append(claim)
            case (4, .lengthDelimited):
                guard let body = reader.delimited(), let ref = deviceRef(body) else { return nil }
                merged.append(ref)
            case (5, .varint):
                guard let value = reader.varint() else { return nil }
                seen = value
            case (1...5, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        // protobuf-c's path refuses a registration without a device or whose bundle ID is empty.
        guard let device, let bundle else { return nil }
        return RegistrationOp(device: device, bundle: bundle, claims: claims, merged: merged, seen: HLCTimestamp(rawValue: seen))
    }

    /// A claim of a known kind with a non-zero 16-byte value; nil otherwise.
    private static func claim(_ bytes: UnsafeRawBufferPointer) -> Identifier? {
        var reader = ProtobufReader(bytes)
        var kind: UInt64 = 0
        var value: UUID128?
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let read = reader.varint() else { return nil }
                kind = read
            case (2, .lengthDelimited):
                guard value == nil, let read = reader.delimited(), let uuid = CRead.uuid(read) else { return nil }
                value = uuid
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        guard let value, !value.isZero, kind <= UInt64(Int32.max), let known = IdentifierKind(rawValue: Int32(kind)) else { return nil }
        return Identifier(kind: known, value: value)
    }

    /// A device with a 16-byte ID, a valid origin and a vendor; nil otherwise.
    private mutating func deviceRef(_ bytes: UnsafeRawBufferPointer) -> DeviceRef? {
        var reader = ProtobufReader(bytes)
        var id: UUID128?
        var created: UInt64 = 0
        var origin: NodeID?
        var vendor: Vendor?
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard id == nil, let read = reader.delimited(), let uuid = CRead.uuid(read) else { return nil }
                id = uuid
            case (2, .varint):
                guard let read = reader.varint() else { return nil }
                created = read
            case (3, .lengthDelimited):
                guard origin == nil, let text = reader.delimited(), let node = origins.value(text, make: { try? NodeID($0) }) else { return nil }
                origin = node
            case (4, .lengthDelimited):
                guard vendor == nil, let text = reader.delimited(), text.count > 0 else { return nil }
                vendor = vendors.value(text, make: { Vendor(trusted: $0) })
            case (1...4, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        guard let id, let origin, let vendor else { return nil }
        return DeviceRef(id: DeviceID(id), created: HLCTimestamp(rawValue: created), origin: origin, vendor: vendor)
    }
}
