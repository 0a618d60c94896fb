import RegistryCore

/// Writes one ``JournalEntry`` in its stored form (see there) straight into a byte buffer, a
/// segment and a record at a time: a commit's operations are encoded where the journal writes
/// them from, with no ``LogSegment`` blob of their own to fill and copy again.
///
/// Use: ``startSegment(origin:epoch:)``, then ``appendRecord(sequence:hlc:writingPayload:)`` for
/// each of its records (sequences increasing), again for each segment, and ``finish(file:)``.
public struct JournalEntryWriter {
    /// What one segment written holds, for the ``JournalIndex``.
    public struct Span: Equatable, Sendable {
        public let origin: String
        public let epoch: UInt64
        public fileprivate(set) var firstSequence: UInt64 = 0
        public fileprivate(set) var lastSequence: UInt64 = 0
        public fileprivate(set) var count = 0
        /// Where the segment's records are in the entry's bytes (``LogSegment``'s blob format).
        public fileprivate(set) var records: Range<Int> = 0..<0

        /// The log the segment belongs to.
        public var log: LogID { LogID(origin: NodeID(trusted: origin), epoch: epoch) }
    }

    private var bytes: [UInt8]
    private let entryStart: Int
    /// Every segment written, the last one still open.
    private var spans: [Span] = []
    /// Where the open segment's records-length field is.
    private var lengthField = 0

    /// Begins an entry stamped with `clock` at the end of `bytes`, which it takes over (a buffer
    /// also held elsewhere would be copied at the first append).
    init(appendingTo bytes: consuming [UInt8], clock: UInt64) {
        self.bytes = bytes
        entryStart = bytes.count
        self.bytes.append(contentsOf: repeatElement(0, count: JournalEntry.headerBytes))
        ByteWriter.append(clock, to: &self.bytes)
        ByteWriter.append(UInt32(0), to: &self.bytes)
    }

    /// The bytes of the entry so far, its header included.
    public var entryBytes: Int { bytes.count - entryStart }

    /// The segment records go to now; nil before the first.
    public var openSegment: Span? { spans.last }

    /// Closes the open segment, if any, and opens one of `origin`'s log `epoch`.
    public mutating func startSegment(origin: String, epoch: UInt64) {
        closeSegment()
        let utf8 = Array(origin.utf8)
        ByteWriter.append(UInt16(utf8.count), to: &bytes)
        bytes.append(contentsOf: utf8)
        ByteWriter.append(epoch, to: &bytes)
        lengthField = bytes.count
        ByteWriter.append(UInt32(0), to: &bytes)
        spans.append(Span(origin: origin, epoch: epoch, records: bytes.count..<bytes.count))
    }

    /// Adds a record to the open segment, its payload appended by `write` in place. Sequences
    /// must increase within a segment.
    public mutating func appendRecord(sequence: UInt64, hlc: UInt64, writingPayload write: (inout [UInt8]) -> Void) {
        precondition(!spans.isEmpty, "a record needs a segment")
        let last = spans.count - 1
        precondition(spans[last].count == 0 || sequence > spans[last].lastSequence, "segment sequences must increase")
        ByteWriter.append(sequence, to: &bytes)
        ByteWriter.append(hlc, to: &bytes)
        let payloadStart = bytes.count + 4
        ByteWriter.append(UInt32(0), to: &bytes)
        write(&bytes)
        store(UInt32(bytes.count - payloadStart), at: payloadStart - 4)
        if spans[last].count == 0 { spans[last].firstSequence = sequence }
        spans[last].lastSequence = sequence
        spans[last].count += 1
    }

    /// Adds a whole segment whose records are already encoded (``LogSegment``'s blob).
    mutating func appendSegment(_ segment: LogSegment) {
        startSegment(origin: segment.origin, epoch: segment.epoch)
        bytes.append(contentsOf: segment.bytes)
        let last = spans.count - 1
        (spans[last].firstSequence, spans[last].lastSequence, spans[last].count) =
            (segment.firstSequence, segment.lastSequence, segment.count)
    }

    /// Closes the entry for journal file `file` (its header and checksum) and returns the buffer
    /// and what each segment holds, leaving the writer empty.
    ///
    /// `mutating`, not `consuming`: a consuming method's first write to the buffer copied all of
    /// it (the whole entry, every commit, into freshly allocated pages), as the consumed value was
    /// not known to be the buffer's sole owner. Swapping the buffer out hands it back without a
    /// copy, and `JournalEntryWriterTests` checks that it does.
    mutating func finish(file: UInt64) -> (bytes: [UInt8], spans: [Span]) {
        closeSegment()
        store(UInt32(spans.count), at: entryStart + JournalEntry.headerBytes + 8)
        JournalEntry.sealHeader(of: &bytes, at: entryStart, magic: JournalEntry.entryMagic, file: file)
        var finished = [UInt8]()
        swap(&finished, &bytes)
        return (finished, spans)
    }

    private mutating func closeSegment() {
        guard !spans.isEmpty else { return }
        store(UInt32(bytes.count - lengthField - 4), at: lengthField)
        spans[spans.count - 1].records = spans[spans.count - 1].records.lowerBound..<bytes.count
    }

    private mutating func store(_ value: UInt32, at offset: Int) {
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self) }
    }
}
