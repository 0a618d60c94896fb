import RegistryCore
/// A run of consecutive records of one (origin, epoch) in a journal entry. The records blob is,
/// per record and little-endian:
/// `sequence u64 | hlc u64 | payload length u32 | payload`.
public struct LogSegment: Equatable, Sendable {
    public let origin: String
    public let epoch: UInt64
    public private(set) var firstSequence: UInt64 = 0
    /// 0 while the segment is empty.
    public private(set) var lastSequence: UInt64 = 0
    public private(set) var count = 0
    /// The encoded records.
    public private(set) var bytes: [UInt8] = []

    static let headerBytes = 20

    /// The log this segment belongs to.
    public var log: LogID { LogID(origin: NodeID(trusted: origin), epoch: epoch) }

    public init(origin: String, epoch: UInt64) {
        self.origin = origin
        self.epoch = epoch
    }

    /// Adds a record; sequences must increase.
    public mutating func append<Payload: Collection>(sequence: UInt64, hlc: UInt64, payload: Payload)
    where Payload.Element == UInt8 {
        precondition(count == 0 || sequence > lastSequence, "segment sequences must increase")
        if count == 0 { firstSequence = sequence }
        lastSequence = sequence
        count += 1
        ByteWriter.append(sequence, to: &bytes)
        ByteWriter.append(hlc, to: &bytes)
        ByteWriter.append(UInt32(payload.count), to: &bytes)
        bytes.append(contentsOf: payload)
    }

    /// A segment over a stored blob, checked: every record whole and sequences increasing.
    /// Throws ``StorageError/corrupt(_:)`` otherwise.
    init(origin: String, epoch: UInt64, blob: [UInt8]) throws(StorageError) {
        self.init(origin: origin, epoch: epoch)
        var first: UInt64 = 0
        var last: UInt64 = 0
        var count = 0
        try Self.forEachRecord(origin: origin, epoch: epoch, blob: blob) { (sequence, _, _) throws(StorageError) in
            guard count == 0 || sequence > last else {
                throw .corrupt("a log segment of \(origin)/\(epoch) repeats sequence \(sequence)")
            }
            if count == 0 { first = sequence }
            last = sequence
            count += 1
        }
        (firstSequence, lastSequence, self.count, bytes) = (first, last, count, blob)
    }

    /// The records of the segment.
    public func records() throws(StorageError) -> [LogRecord] {
        try Self.records(origin: origin, epoch: epoch, blob: bytes)
    }

    /// The records of a stored blob; throws ``StorageError/corrupt(_:)`` when it does not parse.
    /// Their payloads are slices of `blob`, which stays in memory while any of them does: every
    /// record shares it rather than copying its payload into an array of its own.
    public static func records(origin: String, epoch: UInt64, blob: [UInt8]) throws(StorageError) -> [LogRecord] {
        try blob.withUnsafeBytes { raw in
            Result { () throws(StorageError) in
                var records = [LogRecord]()
                try forEachRecord(origin: origin, epoch: epoch, in: raw) { (sequence, hlc, payload) throws(StorageError) in
                    let start = payload.baseAddress.map { $0 - raw.baseAddress! } ?? 0
                    records.append(
                        LogRecord(origin: origin, epoch: epoch, sequence: sequence, hlc: hlc, payload: blob[start..<start + payload.count]))
                }
                return records
            }
        }.get()
    }

    /// Hands each record's sequence, HLC and payload to `body`, in order, the payload in place
    /// (valid only during the call): a replay decodes it without copying it out first.
    public func forEachRecord(
        _ body: (_ sequence: UInt64, _ hlc: UInt64, _ payload: UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        try Self.forEachRecord(origin: origin, epoch: epoch, blob: bytes, body)
    }

    /// Walks a blob's records, handing each one's sequence, HLC and payload (in place) to `body`.
    private static func forEachRecord(
        origin: String, epoch: UInt64, blob: [UInt8], _ body: (UInt64, UInt64, UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        try blob.withUnsafeBytes { raw in
            Result { () throws(StorageError) in try forEachRecord(origin: origin, epoch: epoch, in: raw, body) }
        }.get()
    }

    /// Walks the records of a blob where they lie, handing each one's sequence, HLC and payload
    /// (in place, valid only during the call) to `body`. Throws ``StorageError/corrupt(_:)`` for a
    /// record cut short.
    private static func forEachRecord(
        origin: String, epoch: UInt64, in raw: UnsafeRawBufferPointer,
        _ body: (UInt64, UInt64, UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        var reader = ByteReader(raw, endMessage: "a log segment of \(origin)/\(epoch) ends inside a record header")
        while !reader.isAtEnd {
            let sequence = try reader.read(UInt64.self)
            let hlc = try reader.read(UInt64.self)
            let length = Int(try reader.read(UInt32.self))
            guard length <= reader.remaining else {
                throw .corrupt("a log segment of \(origin)/\(epoch) ends inside record \(sequence)")
            }
            try body(sequence, hlc, try reader.bytes(length))
        }
    }
}
