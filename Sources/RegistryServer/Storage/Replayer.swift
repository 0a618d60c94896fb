import RegistryCore
import RegistryStorage

/// Applies log records to a state in order, through the version vector: what is held is skipped,
/// the next is applied, and one beyond a gap is refused (the caller decides what that means).
/// Shared by start-up and by the snapshot taker, which both rebuild a state from a snapshot and
/// the journal after it.
struct Replayer {
    var registry: RegistryState
    var vector: VersionVector
    /// The newest HLC of any record applied.
    var newest = HLCTimestamp.zero
    /// Records applied, and skipped as already held.
    var applied = 0
    var skipped = 0
    /// Operations past these are left alone (the snapshot taker stops at its target); nil: all.
    var limits: [LogID: UInt64]?
    /// The events of what was applied, when the registry records them (start-up's replay).
    var staging = FeedStaging()

    init(registry: RegistryState, vector: VersionVector, limits: [LogID: UInt64]? = nil) {
        self.registry = registry
        self.vector = vector
        self.limits = limits
    }

    enum Outcome: Equatable {
        case applied, skipped
        case gap(log: LogID, missing: ClosedRange<UInt64>)
    }

    /// Applies one decoded segment's records; stops at the first gap and returns it.
    mutating func apply(_ segment: DecodedSegment) throws(StorageError) -> Outcome? {
        let log = segment.log
        if segment.lastSequence <= vector[log] {
            skipped += segment.count
            return nil
        }
        let limit = limits.map { $0[log] ?? 0 } ?? .max
        let held = vector[log]
        if segment.firstSequence == held + 1, segment.lastSequence <= limit,
            segment.lastSequence - segment.firstSequence == UInt64(segment.count - 1)
        {
            try applyInOrder(segment)
            return nil
        }
        for record in segment.records {
            if record.sequence > limit { continue }
            let outcome = try admit(record.sequence, in: log, at: HLCTimestamp(rawValue: record.hlc)) { () throws(StorageError) in
                try Self.operation(of: record, in: segment)
            }
            if case .gap = outcome { return outcome }
        }
        return nil
    }

    /// Applies a segment whose records are all next in order (it continues the log without a gap
    /// and within the limit): the usual case, which needs no per-record admission. While one record
    /// is applied, the index buckets of the one ``RegistryState/prefetchDistance`` ahead are asked
    /// for. Fields are read from the records where they lie, not copied out (a copy of an operation
    /// retains and releases its bytes and arrays; docs/performance.md, "Replaying
    /// registrations").
    private mutating func applyInOrder(_ segment: DecodedSegment) throws(StorageError) {
        let (log, records) = (segment.log, segment.records)
        var through = vector[log]
        defer { vector.recordAll(through: through, in: log) }
        for index in records.indices {
            if index + RegistryState.prefetchDistance < records.count, let ahead = records[index + RegistryState.prefetchDistance].operation {
                registry.prefetch(for: ahead)
            }
            let sequence = records[index].sequence
            guard let operation = records[index].operation else { throw Self.undecodable(sequence, in: segment) }
            applyNext(operation, sequence, in: log, at: HLCTimestamp(rawValue: records[index].hlc))
            through = sequence
        }
    }

    /// Applies operation `sequence` of `log`, the next one, and what goes with it (its events, the
    /// newest HLC, the count); the caller records it in the vector.
    private mutating func applyNext(_ operation: Operation, _ sequence: UInt64, in log: LogID, at timestamp: HLCTimestamp) {
        registry.apply(operation)
        if registry.recordsEvents { registry.moveEvents(to: &staging, log: log, sequence: sequence, time: timestamp) }
        newest = max(newest, timestamp)
        applied += 1
    }

    /// `record`'s operation; when it does not decode, the error that stops the replay. Its
    /// checksum held, so it was written so: the node refuses to serve without it.
    private static func operation(of record: DecodedSegment.Record, in segment: DecodedSegment) throws(StorageError) -> Operation {
        guard let operation = record.operation else { throw undecodable(record.sequence, in: segment) }
        return operation
    }

    private static func undecodable(_ sequence: UInt64, in segment: DecodedSegment) -> StorageError {
        .corrupt("operation \(segment.log)/\(sequence) does not decode: \(segment.failures[sequence] ?? "?")")
    }

    /// Applies what the journal's `files` hold past ``vector`` (up to ``limits``), reading only the
    /// files that hold some of it; throws on a gap, which the journal must not have past a
    /// snapshot, and on a record that does not read back inside a file's durable bytes. The
    /// files are read and decoded on a thread of their own (``JournalReadAhead``), unless
    /// `inBackground` (the snapshot taker's replay, at `SCHED_IDLE`): then on this one.
    mutating func replay(_ files: [JournalIndex.File], in directory: String, on fs: any FileSystem, inBackground: Bool = false) throws(StorageError) {
        let (held, limits) = (vector, limits)
        let needed = files.filter { file in
            file.ranges.contains { log, range in
                range.upperBound > held[log] && range.lowerBound <= limits.map { $0[log] ?? 0 } ?? .max
            }
        }
        try JournalReadAhead.run(
            named: "journal-read", skippingWhat: held, readingAhead: !inBackground,
            reading: { (give) throws(StorageError) in
                var buffer = [UInt8]()
                for file in needed {
                    let size = try fs.readAll(CommitJournal.path(in: directory, number: file.number), reusing: &buffer)
                    guard size >= file.durableBytes else {
                        throw .corrupt(
                            "journal file \(CommitJournal.path(in: directory, number: file.number)) holds \(size) bytes, fewer than the \(file.durableBytes) made durable")
                    }
                    let durable = file.durableBytes
                    var offset = 0
                    while offset < durable {
                        let read = buffer.withUnsafeBytes { raw in
                            Result { () throws(StorageError) in
                                try JournalEntry.read(UnsafeRawBufferPointer(rebasing: raw[0..<durable]), at: offset, file: file.number)
                            }
                        }
                        switch try read.get() {
                        case .entry(let entry, let next):
                            offset = next
                            try give(entry)
                        case .rotated where offset + JournalEntry.headerBytes == durable:
                            offset = durable  // the marker that closes a full file
                        case .rotated, .torn, .end:
                            // Recovery checked these bytes, or the node wrote them since: what
                            // does not read back now was damaged, and stopping here would drop
                            // the acknowledged entries after it without a word.
                            throw .corrupt(
                                "journal file \(CommitJournal.path(in: directory, number: file.number)) does not read back at byte \(offset), inside its \(durable) durable bytes"
                            )
                        }
                    }
                }
            },
            applying: { (entry) throws(StorageError) in
                newest = max(newest, HLCTimestamp(rawValue: entry.clock))
                for segment in entry.segments {
                    if case .gap(let log, let missing) = try apply(segment) {
                        throw .corrupt("the journal lacks operations \(missing) of \(log), which the snapshot does not cover")
                    }
                }
            })
    }

    /// Applies one operation not yet in the journal (one still pending a commit), through the
    /// same rules as a record.
    mutating func apply(_ operation: LoggedOperation) -> Outcome {
        let log = LogID(origin: operation.origin, epoch: operation.epoch)
        return admit(operation.sequence, in: log, at: operation.timestamp) { operation.operation }
    }

    /// Skips `sequence` when held, stops at a gap, and otherwise applies what `operation` gives.
    private mutating func admit<Failure: Error>(
        _ sequence: UInt64, in log: LogID, at timestamp: HLCTimestamp, _ operation: () throws(Failure) -> Operation
    ) throws(Failure) -> Outcome {
        switch vector.admission(of: sequence, in: log) {
        case .duplicate:
            skipped += 1
            return .skipped
        case .gap(let missing):
            return .gap(log: log, missing: missing)
        case .next:
            break
        }
        applyNext(try operation(), sequence, in: log, at: timestamp)
        vector.record(sequence, in: log)
        return .applied
    }
}
