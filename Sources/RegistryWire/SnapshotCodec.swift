import RegistryCore

/// What a snapshot covers, kept in its header: the node that wrote it, its epoch, its clock, and
/// the version vector of the state it holds (every operation up to each log's sequence).
public struct SnapshotMetadata: Equatable, Sendable {
    public var nodeID: NodeID
    public var epoch: UInt64
    public var clock: HLCTimestamp
    public var versionVector: VersionVector
    /// The records that follow, for sizing the indexes before restoring.
    public var devices: UInt64

    public init(nodeID: NodeID, epoch: UInt64, clock: HLCTimestamp, versionVector: VersionVector, devices: UInt64) {
        self.nodeID = nodeID
        self.epoch = epoch
        self.clock = clock
        self.versionVector = versionVector
        self.devices = devices
    }
}

/// The bytes of a snapshot's metadata and records (little-endian, strings as a 16-bit length and
/// UTF-8). Decoding re-checks what the identity rules check, so a damaged snapshot that still
/// passed its checksums is refused rather than restored.
public enum SnapshotCodec {
    enum Tag: UInt8 {
        case device = 1, alias = 2, claim = 3, app = 4, origin = 5, vendor = 6, bundle = 7, member = 8, binding = 9, tombstone = 10, vendorRule = 11
        case laterIDFV = 12, clone = 13
    }

    public static func encode(_ metadata: SnapshotMetadata) -> [UInt8] {
        Output.bytes { out in encode(metadata, into: &out) }
    }

    private static func encode(_ metadata: SnapshotMetadata, into out: inout Output) {
        out.string(metadata.nodeID.value)
        out.integer(metadata.epoch)
        out.integer(metadata.clock.rawValue)
        out.integer(metadata.devices)
        let logs = metadata.versionVector.logs
        out.integer(UInt32(logs.count))
        for (log, sequence) in logs {
            out.string(log.origin.value)
            out.integer(log.epoch)
            out.integer(sequence)
        }
    }

    public static func decodeMetadata(_ bytes: [UInt8]) throws(CodecError) -> SnapshotMetadata {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(CodecError) -> SnapshotMetadata in
                var input = Input(raw)
                let node = try input.nodeID()
                let epoch = try input.integer(UInt64.self)
                let clock = HLCTimestamp(rawValue: try input.integer(UInt64.self))
                let devices = try input.integer(UInt64.self)
                var vector = VersionVector()
                for _ in 0..<(try input.integer(UInt32.self)) {
                    let log = LogID(origin: try input.nodeID(), epoch: try input.integer(UInt64.self))
                    let sequence = try input.integer(UInt64.self)
                    guard VersionVector.isReadable(epoch: log.epoch, sequence: sequence) else {
                        throw CodecError.invalidField(
                            "snapshot metadata holds \(log) through \(sequence): an epoch 0, or a sequence past the largest a log may reach")
                    }
                    guard vector[log] == 0 else { throw CodecError.invalidField("snapshot metadata names \(log) twice") }
                    vector.recordAll(through: sequence, in: log)
                }
                try input.end()
                return SnapshotMetadata(nodeID: node, epoch: epoch, clock: clock, versionVector: vector, devices: devices)
            }
        }.get()
    }

    /// Replaces `bytes` with `record`'s bytes.
    public static func encode(_ record: SnapshotRecord, into bytes: inout [UInt8]) {
        bytes = Output.bytes { out in encode(record, into: &out) }
    }

    /// How many bytes ``write(_:to:)`` writes for `record`.
    public static func encodedSize(of record: SnapshotRecord) -> Int {
        var counter = Output(writingTo: nil)
        encode(record, into: &counter)
        return counter.count
    }

    /// Writes `record`'s bytes from `base` on, ``encodedSize(of:)`` of them: for a caller that
    /// encodes records straight into a buffer it keeps (a snapshot block).
    public static func write(_ record: SnapshotRecord, to base: UnsafeMutableRawPointer) {
        var out = Output(writingTo: base)
        encode(record, into: &out)
    }

    private static func encode(_ record: SnapshotRecord, into out: inout Output) {
        switch record {
        case .origin(let origin):
            out.integer(Tag.origin.rawValue)
            out.string(origin.value)
        case .vendor(let vendor):
            out.integer(Tag.vendor.rawValue)
            out.string(vendor.name)
        case .bundle(let bundle):
            out.integer(Tag.bundle.rawValue)
            out.string(bundle.value)
        case .device(let id, let created, let origin, let vendor):
            out.integer(Tag.device.rawValue)
            out.uuid(id.uuid)
            out.integer(created.rawValue)
            out.integer(origin)
            out.integer(vendor)
        case .alias(let alias, let canonical):
            out.integer(Tag.alias.rawValue)
            out.integer(alias)
            out.integer(canonical)
        case .claim(let vendor, let identifier, let owner):
            out.integer(Tag.claim.rawValue)
            out.integer(vendor)
            out.integer(UInt8(identifier.kind.rawValue))
            out.uuid(identifier.value)
            out.integer(owner)
        case .app(let device, let bundle, let first, let last):
            out.integer(Tag.app.rawValue)
            out.integer(device)
            out.integer(bundle)
            out.integer(first.rawValue)
            out.integer(last.rawValue)
        case .member(let node, let member):
            out.integer(Tag.member.rawValue)
            out.string(node.value)
            out.string(member.address)
            out.integer(member.addressAt.rawValue)
            out.integer(UInt8(member.removed ? 1 : 0))
        case .binding(let kind, let vendor, let account, let device, let time, let origin):
            out.integer(Tag.binding.rawValue)
            out.integer(kind.rawValue)
            out.integer(vendor)
            out.uuid(account)
            out.uuid(device.uuid)
            out.integer(time.rawValue)
            out.integer(origin)
        case .tombstone(let device):
            out.integer(Tag.tombstone.rawValue)
            out.uuid(device.uuid)
        case .vendorRule(let change):
            out.integer(Tag.vendorRule.rawValue)
            out.integer(change.kind.rawValue)
            out.string(change.name)
            out.integer(change.time.rawValue)
            out.string(change.origin.value)
            let prefixes = change.rule?.prefixes ?? []
            out.integer(UInt16(prefixes.count))
            for prefix in prefixes { out.string(prefix) }
            out.integer(UInt32(change.rule?.binding.maxDevices ?? 0))
            out.integer(UInt32(change.rule?.binding.activeWithinDays ?? 0))
            out.integer(UInt8(change.rule?.binding.pastLimit == .replace ? 1 : 0))
            // Written only with a move or a clone policy other than the default, so that a change
            // with neither reads as before moves existed (an empty move is no move).
            let clones = change.rule?.clones ?? .default
            if change.move != nil || clones != .default {
                let move = change.move
                out.integer(UInt16(move?.from.count ?? 0))
                for name in move?.from ?? [] { out.string(name) }
                out.string(move?.into ?? "")
            }
            if clones != .default {
                out.integer(clones.wireAction)
                out.integer(UInt32(clones.windowDays))
            }
        case .laterIDFV(let device, let claim, let appeared):
            out.integer(Tag.laterIDFV.rawValue)
            out.integer(device)
            out.uuid(claim)
            out.integer(appeared.rawValue)
        case .clone(let op):
            // The operation's own log encoding, behind a length.
            out.integer(Tag.clone.rawValue)
            let encoded = OperationCodec.encode(.clone(op))
            out.integer(UInt32(encoded.count))
            out.raw(encoded)
        }
    }

    public static func decodeRecord(_ raw: UnsafeRawBufferPointer) throws(CodecError) -> SnapshotRecord {
        var input = Input(raw)
        let record: SnapshotRecord
        switch Tag(rawValue: try input.integer(UInt8.self)) {
        case .origin:
            record = .origin(try input.nodeID())
        case .vendor:
            record = .vendor(try input.vendor())
        case .bundle:
            let text = try input.string()
            do {
                record = .bundle(try BundleID(parsing: text))
            } catch {
                throw .invalidField("snapshot bundle: \(error)")
            }
        case .device:
            let id = DeviceID(try input.uuid())
            let created = HLCTimestamp(rawValue: try input.integer(UInt64.self))
            record = .device(id: id, created: created, origin: try input.integer(UInt32.self), vendor: try input.integer(UInt32.self))
        case .alias:
            record = .alias(try input.integer(UInt32.self), of: try input.integer(UInt32.self))
        case .claim:
            let vendor = try input.integer(UInt32.self)
            let rawKind = try input.integer(UInt8.self)
            guard let kind = IdentifierKind(rawValue: Int32(rawKind)) else { throw .invalidField("snapshot claim of kind \(rawKind)") }
            let value = try input.uuid()
            guard !value.isZero else { throw .invalidField("snapshot claim of the all-zero UUID") }
            record = .claim(vendor: vendor, identifier: Identifier(kind: kind, value: value), owner: try input.integer(UInt32.self))
        case .app:
            let device = try input.integer(UInt32.self)
            let bundle = try input.integer(UInt32.self)
            record = .app(
                device: device, bundle: bundle, first: HLCTimestamp(rawValue: try input.integer(UInt64.self)),
                last: HLCTimestamp(rawValue: try input.integer(UInt64.self)))
        case .member:
            let node = try input.nodeID()
            let address = try input.string()
            let at = HLCTimestamp(rawValue: try input.integer(UInt64.self))
            record = .member(node, Member(address: address, addressAt: at, removed: try input.integer(UInt8.self) != 0))
        case .binding:
            let rawKind = try input.integer(UInt8.self)
            guard let kind = BindingChange.Kind(rawValue: rawKind) else { throw .invalidField("snapshot binding of kind \(rawKind)") }
            let vendor = try input.integer(UInt32.self)
            let account = try input.uuid()
            let device = DeviceID(try input.uuid())
            let time = HLCTimestamp(rawValue: try input.integer(UInt64.self))
            record = .binding(kind: kind, vendor: vendor, account: account, device: device, time: time, origin: try input.integer(UInt32.self))
        case .tombstone:
            record = .tombstone(DeviceID(try input.uuid()))
        case .vendorRule:
            let rawKind = try input.integer(UInt8.self)
            guard let kind = VendorRuleChange.Kind(rawValue: rawKind) else { throw .invalidField("snapshot vendor rule of kind \(rawKind)") }
            let name = try input.string()
            let time = HLCTimestamp(rawValue: try input.integer(UInt64.self))
            let origin = try input.nodeID()
            var prefixes = [String]()
            for _ in 0..<Int(try input.integer(UInt16.self)) { prefixes.append(try input.string()) }
            let (maxDevices, window) = (Int(try input.integer(UInt32.self)), Int(try input.integer(UInt32.self)))
            let pastLimit: BindingPolicy.PastLimit = try input.integer(UInt8.self) == 1 ? .replace : .reject
            var (moved, movedInto) = ([String](), "")
            if !input.isAtEnd {
                for _ in 0..<Int(try input.integer(UInt16.self)) { moved.append(try input.string()) }
                movedInto = try input.string()
            }
            var (cloneAction, cloneWindow) = (UInt8(0), 0)
            if !input.isAtEnd {
                cloneAction = try input.integer(UInt8.self)
                cloneWindow = Int(try input.integer(UInt32.self))
            }
            do throws(IdentityError) {
                record = .vendorRule(
                    try VendorRuleChange.reading(
                        kind: kind, name: name, prefixes: prefixes, maxDevices: maxDevices, activeWithinDays: window, pastLimit: pastLimit,
                        time: time, origin: origin, moved: moved, movedInto: movedInto, cloneAction: cloneAction, cloneWindowDays: cloneWindow))
            } catch {
                throw .invalidField("snapshot vendor rule \(name.debugDescription): \(error)")
            }
        case .laterIDFV:
            let device = try input.integer(UInt32.self)
            let claim = try input.uuid()
            guard !claim.isZero else { throw .invalidField("snapshot later IDFV of the all-zero UUID") }
            record = .laterIDFV(device: device, claim: claim, appeared: HLCTimestamp(rawValue: try input.integer(UInt64.self)))
        case .clone:
            let count = Int(try input.integer(UInt32.self))
            let bytes = try input.bytes(count)
            guard case .clone(let op) = try OperationCodec.decode(bytes) else { throw .invalidField("a snapshot clone record holds another operation") }
            record = .clone(op)
        case nil:
            throw .invalidField("a snapshot record of an unknown kind")
        }
        try input.end()
        return record
    }

    /// Where an encoding's bytes go: written from `base` on, or, with no `base`, only counted.
    /// Fields are stored in place; appending each to an array was most of a snapshot child's
    /// encoding time (docs/performance.md, "A snapshot child's CPU").
    private struct Output {
        let base: UnsafeMutableRawPointer?
        private(set) var count = 0

        init(writingTo base: UnsafeMutableRawPointer?) {
            self.base = base
        }

        /// The bytes `encode` writes: counted first, then written into an array of that size.
        static func bytes(_ encode: (inout Output) -> Void) -> [UInt8] {
            var counter = Output(writingTo: nil)
            encode(&counter)
            return [UInt8](unsafeUninitializedCapacity: counter.count) { buffer, initialized in
                var out = Output(writingTo: UnsafeMutableRawPointer(buffer.baseAddress))
                encode(&out)
                precondition(out.count == counter.count, "an encoding wrote \(out.count) bytes after counting \(counter.count)")
                initialized = out.count
            }
        }

        mutating func integer<Value: FixedWidthInteger>(_ value: Value) {
            base?.storeBytes(of: value.littleEndian, toByteOffset: count, as: Value.self)
            count += MemoryLayout<Value>.size
        }

        mutating func uuid(_ value: UUID128) {
            integer(value.high)
            integer(value.low)
        }

        mutating func string(_ text: String) {
            var text = text
            text.withUTF8 { utf8 in
                integer(UInt16(utf8.count))
                raw(UnsafeRawBufferPointer(utf8))
            }
        }

        mutating func raw(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { raw($0) }
        }

        mutating func raw(_ bytes: UnsafeRawBufferPointer) {
            if let base, let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
            count += bytes.count
        }
    }

    private struct Input {
        let raw: UnsafeRawBufferPointer
        var offset = 0

        init(_ raw: UnsafeRawBufferPointer) {
            self.raw = raw
        }

        mutating func integer<Value: FixedWidthInteger>(_: Value.Type) throws(CodecError) -> Value {
            let size = MemoryLayout<Value>.size
            guard raw.count - offset >= size else { throw .invalidField("a snapshot record ends inside a field") }
            defer { offset += size }
            return Value(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: Value.self))
        }

        mutating func uuid() throws(CodecError) -> UUID128 {
            UUID128(high: try integer(UInt64.self), low: try integer(UInt64.self))
        }

        mutating func string() throws(CodecError) -> String {
            let count = Int(try integer(UInt16.self))
            guard raw.count - offset >= count else { throw .invalidField("a snapshot record ends inside a string") }
            defer { offset += count }
            guard let text = String(validating: raw[offset..<offset + count], as: UTF8.self) else {
                throw .invalidField("a snapshot string is not UTF-8")
            }
            return text
        }

        mutating func bytes(_ count: Int) throws(CodecError) -> [UInt8] {
            guard count >= 0, raw.count - offset >= count else { throw .invalidField("a snapshot record ends inside its bytes") }
            defer { offset += count }
            return Array(raw[offset..<offset + count])
        }

        mutating func nodeID() throws(CodecError) -> NodeID {
            let text = try string()
            do {
                return try NodeID(text)
            } catch {
                throw .invalidField("snapshot node ID: \(error)")
            }
        }

        mutating func vendor() throws(CodecError) -> Vendor {
            let name = try string()
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 == 0x2D || $0 == 0x2E || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
            else { throw .invalidField("snapshot vendor \(name.debugDescription) is not a vendor name") }
            return Vendor(trusted: name)
        }

        var isAtEnd: Bool { offset == raw.count }

        func end() throws(CodecError) {
            guard offset == raw.count else { throw .invalidField("a snapshot record has \(raw.count - offset) bytes too many") }
        }
    }
}
