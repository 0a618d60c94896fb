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

    public init(origin: String, epoch: UInt64, reservingBytes: Int = 0) {
        self.origin = origin
        self.epoch = epoch
        bytes.reserveCapacity(reservingBytes)
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

    /// Adds a record whose payload `write` appends to the segment's bytes in place (saving a
    /// copy); sequences must increase. When `write` throws, the segment is left as it was.
    public mutating func append<Failure: Error>(
        sequence: UInt64, hlc: UInt64, writingPayload write: (inout [UInt8]) throws(Failure) -> Void
    ) throws(Failure) {
        precondition(count == 0 || sequence > lastSequence, "segment sequences must increase")
        let recordStart = bytes.count
        ByteWriter.append(sequence, to: &bytes)
        ByteWriter.append(hlc, to: &bytes)
        ByteWriter.append(UInt32(0), to: &bytes)
        let payloadStart = bytes.count
        do {
            try write(&bytes)
        } catch {
            bytes.removeSubrange(recordStart...)
            throw error
        }
        let length = UInt32(bytes.count - payloadStart)
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: length.littleEndian, toByteOffset: payloadStart - 4, as: UInt32.self) }
        if count == 0 { firstSequence = sequence }
        lastSequence = sequence
        count += 1
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
    public static func records(origin: String, epoch: UInt64, blob: [UInt8]) throws(StorageError) -> [LogRecord] {
        var records = [LogRecord]()
        try forEachRecord(origin: origin, epoch: epoch, blob: blob) { (sequence, hlc, payload) throws(StorageError) in
            records.append(LogRecord(origin: origin, epoch: epoch, sequence: sequence, hlc: hlc, payload: Array(payload)))
        }
        return records
    }

    /// Hands each record's sequence, HLC and payload to `body`, in order, the payload in place
    /// (valid only during the call): a replay decodes it without copying it out first.
    public func forEachRecord(
        _ body: (_ sequence: UInt64, _ hlc: UInt64, _ payload: UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        try Self.forEachRecord(origin: origin, epoch: epoch, blob: bytes, body)
    }

    /// Hands each record of records this process just encoded (``JournalEntryWriter``) to
    /// `body`: sequence, HLC and payload (in place, valid only during the call). The bytes are
    /// trusted, not checked: records read from a file go through ``forEachRecord(_:)``.
    static func forEachWrittenRecord(
        in records: UnsafeRawBufferPointer, _ body: (_ sequence: UInt64, _ hlc: UInt64, _ payload: UnsafeRawBufferPointer) -> Void
    ) {
        var at = 0
        while at < records.count {
            let sequence = UInt64(littleEndian: records.loadUnaligned(fromByteOffset: at, as: UInt64.self))
            let hlc = UInt64(littleEndian: records.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self))
            let length = Int(UInt32(littleEndian: records.loadUnaligned(fromByteOffset: at + 16, as: UInt32.self)))
            precondition(at + Self.headerBytes + length <= records.count, "a record written runs past its segment")
            body(sequence, hlc, UnsafeRawBufferPointer(rebasing: records[(at + Self.headerBytes)..<(at + Self.headerBytes + length)]))
            at += Self.headerBytes + length
        }
    }

    /// Walks a blob's records, handing each one's sequence, HLC and payload (in place) to `body`.
    private static func forEachRecord(
        origin: String, epoch: UInt64, blob: [UInt8], _ body: (UInt64, UInt64, UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        let walked = blob.withUnsafeBytes { raw in
            Result { () throws(StorageError) in
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
        try walked.get()
    }
}
