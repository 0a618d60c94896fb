import RegistryCore
import RegistryStorage
import RegistryWire

/// A log segment with its records' operations decoded: what a ``Replayer`` applies. Decoding is
/// kept apart from applying so that it can run on another thread (``JournalReadAhead``).
///
/// A record that does not decode is kept as such, with the reason: whether that stops a replay
/// depends on whether the replay needs the record, which only the applying side knows.
struct DecodedSegment: Sendable {
    /// One record of the segment.
    struct Record: Sendable {
        let sequence: UInt64
        let hlc: UInt64
        /// Nil when the payload does not decode; ``DecodedSegment/failures`` says why.
        let operation: Operation?
    }

    let log: LogID
    let firstSequence: UInt64
    let lastSequence: UInt64
    /// Records in the segment, decoded or not.
    let count: Int
    /// The records, in order; empty when the segment was not decoded because it is held already
    /// (see ``init(_:decoder:unlessHeldBy:)``).
    let records: [Record]
    /// Why each record that does not decode does not, by sequence.
    let failures: [UInt64: String]

    /// Decodes `segment`'s records with `decoder`, unless `held` already holds all of them: a
    /// replay skips such a segment without looking at its records.
    init(_ segment: LogSegment, decoder: inout OperationDecoder, unlessHeldBy held: VersionVector? = nil) throws(StorageError) {
        log = segment.log
        firstSequence = segment.firstSequence
        lastSequence = segment.lastSequence
        count = segment.count
        var records = [Record]()
        var failures = [UInt64: String]()
        if let held, segment.lastSequence <= held[log] {
            (self.records, self.failures) = (records, failures)
            return
        }
        records.reserveCapacity(segment.count)
        try segment.forEachRecord { (sequence, hlc, payload) throws(StorageError) in
            do {
                records.append(Record(sequence: sequence, hlc: hlc, operation: try decoder.decode(payload)))
            } catch {
                records.append(Record(sequence: sequence, hlc: hlc, operation: nil))
                failures[sequence] = "\(error)"
            }
        }
        (self.records, self.failures) = (records, failures)
    }
}

/// A journal entry with its segments decoded (see ``DecodedSegment``).
struct DecodedEntry: Sendable {
    let clock: UInt64
    let segments: [DecodedSegment]
    /// Records in the entry's segments.
    let count: Int

    init(_ entry: JournalEntry, decoder: inout OperationDecoder, unlessHeldBy held: VersionVector? = nil) throws(StorageError) {
        clock = entry.clock
        var segments = [DecodedSegment]()
        segments.reserveCapacity(entry.segments.count)
        for segment in entry.segments { segments.append(try DecodedSegment(segment, decoder: &decoder, unlessHeldBy: held)) }
        self.segments = segments
        count = segments.reduce(0) { $0 + $1.count }
    }
}
