/// One group commit as the ``CommitJournal`` stores it: the log segments it appended and the
/// node's clock as of the commit (restored at start-up, so the clock never runs backwards).
/// Encoding is pure, so the format is tested without files.
///
/// A record on disk, little-endian: `magic u32 | payload length u32 | file number u64 |
/// checksum u64 | payload`. The checksum covers the payload and the file number. An entry's
/// payload is `clock u64 | segment count u32` and then per segment
/// `origin length u16 | origin UTF-8 | epoch u64 | records length u32 | records`
/// (records in ``LogSegment``'s blob format). A rotation marker has its own magic and no
/// payload: it closes a file that is full.
///
/// The file number in every header tells a record of this file from bytes of any other.
public struct JournalEntry: Equatable, Sendable {
    public var segments: [LogSegment]
    public var clock: UInt64

    public init(segments: [LogSegment], clock: UInt64) {
        self.segments = segments
        self.clock = clock
    }

    static let entryMagic: UInt32 = 0x324A_5252  // "RRJ2"
    static let rotationMagic: UInt32 = 0x454A_5252  // "RRJE"
    public static let headerBytes = 24
    /// Larger payloads are refused when read back: no commit writes one (see ``LogWriter``).
    static let maxPayloadBytes = 1 << 30

    /// Appends the whole entry for journal file `file`, header and checksum included, to `bytes`.
    public func encode(into bytes: inout [UInt8], file: UInt64) {
        var taken = [UInt8]()
        swap(&taken, &bytes)
        var writer = JournalEntryWriter(appendingTo: consume taken, clock: clock)
        for segment in segments { writer.appendSegment(segment) }
        bytes = writer.finish(file: file).bytes
    }

    /// Appends the marker that closes full journal file `file`.
    public static func encodeRotationMarker(into bytes: inout [UInt8], file: UInt64) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: headerBytes))
        sealHeader(of: &bytes, at: start, magic: rotationMagic, file: file)
    }

    /// Fills in the header reserved at `start`, for the payload that follows it.
    static func sealHeader(of bytes: inout [UInt8], at start: Int, magic: UInt32, file: UInt64) {
        let payloadCount = bytes.count - start - headerBytes
        let checksum = bytes.withUnsafeBytes {
            JournalChecksum.of(UnsafeRawBufferPointer(rebasing: $0[(start + headerBytes)...]), seed: file)
        }
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: magic.littleEndian, toByteOffset: start, as: UInt32.self)
            raw.storeBytes(of: UInt32(payloadCount).littleEndian, toByteOffset: start + 4, as: UInt32.self)
            raw.storeBytes(of: file.littleEndian, toByteOffset: start + 8, as: UInt64.self)
            raw.storeBytes(of: checksum.littleEndian, toByteOffset: start + 16, as: UInt64.self)
        }
    }

    /// What reading at an offset of journal file N found.
    public enum Read: Equatable {
        /// A whole entry and the offset just past it.
        case entry(JournalEntry, next: Int)
        /// The marker of a full file: nothing of file N follows.
        case rotated
        /// A record of file N whose write did not complete (or was damaged): the end of what
        /// file N holds, since nothing after it was acknowledged.
        case torn(reason: String)
        /// No record of file N starts here: the end of the bytes, never-written space, or a
        /// record left by the file's previous use.
        case end
    }

    /// Reads the record that starts at `offset` of journal file `file`'s `bytes`. An entry whose
    /// checksum matches but whose payload does not parse throws ``StorageError/corrupt(_:)``:
    /// that was written so.
    public static func read(_ bytes: UnsafeRawBufferPointer, at offset: Int, file: UInt64) throws(StorageError) -> Read {
        guard offset < bytes.count else { return .end }
        guard bytes.count - offset >= headerBytes else { return .torn(reason: "a partial record header") }
        let magic = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        let number = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
        guard magic == entryMagic || magic == rotationMagic, number == file else { return .end }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        let checksum = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
        let payloadStart = offset + headerBytes
        guard length <= maxPayloadBytes, bytes.count - payloadStart >= length else {
            return .torn(reason: "a record of \(length) bytes with \(bytes.count - payloadStart) left")
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
        guard JournalChecksum.of(payload, seed: file) == checksum else { return .torn(reason: "a checksum mismatch") }
        if magic == rotationMagic { return .rotated }
        return .entry(try decodePayload(payload), next: payloadStart + length)
    }

    /// Where the record at `offset` ends by its header's length, when a whole header is there;
    /// whether the payload is intact is not checked.
    static func declaredEnd(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int? {
        guard offset >= 0, bytes.count - offset >= headerBytes else { return nil }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)))
        return offset + headerBytes + length
    }

    private static func decodePayload(_ payload: UnsafeRawBufferPointer) throws(StorageError) -> JournalEntry {
        var reader = ByteReader(payload, endMessage: "a journal entry ends inside a field")
        let clock = try reader.read(UInt64.self)
        let count = Int(try reader.read(UInt32.self))
        var segments = [LogSegment]()
        for _ in 0..<count {
            let originLength = Int(try reader.read(UInt16.self))
            guard let origin = String(validating: try reader.bytes(originLength), as: UTF8.self) else {
                throw .corrupt("a journal entry names an origin that is not UTF-8")
            }
            let epoch = try reader.read(UInt64.self)
            let recordsLength = Int(try reader.read(UInt32.self))
            segments.append(try LogSegment(origin: origin, epoch: epoch, blob: Array(try reader.bytes(recordsLength))))
        }
        guard reader.isAtEnd else { throw .corrupt("a journal entry has \(reader.remaining) bytes after its segments") }
        return JournalEntry(segments: segments, clock: clock)
    }
}
