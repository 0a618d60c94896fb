import RegistryCore
import RegistryStorage
import RegistryWire

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
    /// Decodes the records in turn, remembering the texts they repeat.
    private var decoder = OperationDecoder()

    init(registry: RegistryState, vector: VersionVector, limits: [LogID: UInt64]? = nil) {
        self.registry = registry
        self.vector = vector
        self.limits = limits
    }

    enum Outcome: Equatable {
        case applied, skipped, beyondLimit
        case gap(log: LogID, missing: ClosedRange<UInt64>)
    }

    /// Applies one segment's records; stops at the first gap and returns it.
    mutating func apply(_ segment: LogSegment) throws(StorageError) -> Outcome? {
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
            try applyInOrder(segment, log: log)
            return nil
        }
        for record in try segment.records() {
            switch try apply(record, log: log, limit: limit) {
            case .gap(let log, let missing): return .gap(log: log, missing: missing)
            case .applied, .skipped, .beyondLimit: continue
            }
        }
        return nil
    }

    /// Applies a segment whose records are all next in order (it continues the log without a gap
    /// and within the limit): the usual case, which needs no per-record admission. Each payload is
    /// decoded where it lies.
    private mutating func applyInOrder(_ segment: LogSegment, log: LogID) throws(StorageError) {
        var through = vector[log]
        defer { vector.recordAll(through: through, in: log) }
        try segment.forEachRecord { (sequence, hlc, payload) throws(StorageError) in
            let operation: Operation
            do {
                operation = try decoder.decode(payload)
            } catch {
                throw Self.undecodable(log, sequence, error)
            }
            applyNext(operation, sequence, in: log, at: HLCTimestamp(rawValue: hlc))
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

    /// Its checksum held, so it was written so: the node refuses to serve without it.
    private static func undecodable(_ log: LogID, _ sequence: UInt64, _ error: any Error) -> StorageError {
        .corrupt("operation \(log)/\(sequence) does not decode: \(error)")
    }

    /// Applies what the journal's `files` hold past ``vector`` (up to ``limits``), reading only the
    /// files that hold some of it; throws on a gap, which the journal must not have past a
    /// snapshot.
    mutating func replay(_ files: [JournalIndex.File], in directory: String, on fs: any FileSystem) throws(StorageError) {
        var buffer = [UInt8]()
        for file in files {
            let needed = file.ranges.contains { log, range in
                range.upperBound > vector[log]
                    && range.lowerBound <= limits.map { $0[log] ?? 0 } ?? .max
            }
            guard needed else { continue }
            let size = try fs.readAll(CommitJournal.path(in: directory, number: file.number), reusing: &buffer)
            let durable = min(size, file.durableBytes)
            var offset = 0
            while offset < durable {
                let read = buffer.withUnsafeBytes { raw in
                    Result { () throws(StorageError) in
                        try JournalEntry.read(UnsafeRawBufferPointer(rebasing: raw[0..<durable]), at: offset, file: file.number)
                    }
                }
                guard case .entry(let entry, let next) = try read.get() else { break }
                offset = next
                newest = max(newest, HLCTimestamp(rawValue: entry.clock))
                for segment in entry.segments {
                    if case .gap(let log, let missing) = try apply(segment) {
                        throw .corrupt("the journal lacks operations \(missing) of \(log), which the snapshot does not cover")
                    }
                }
            }
        }
    }

    /// Applies one operation not yet in the journal (one still pending a commit), through the
    /// same rules as a record.
    mutating func apply(_ operation: LoggedOperation) -> Outcome {
        let log = LogID(origin: operation.origin, epoch: operation.epoch)
        return admit(operation.sequence, in: log, at: operation.timestamp) { operation.operation }
    }

    private mutating func apply(_ record: LogRecord, log: LogID, limit: UInt64) throws(StorageError) -> Outcome {
        if record.sequence > limit { return .beyondLimit }
        return try admit(record.sequence, in: log, at: HLCTimestamp(rawValue: record.hlc)) { () throws(StorageError) in
            do {
                return try OperationCodec.decode(record.payload)
            } catch {
                throw Self.undecodable(log, record.sequence, error)
            }
        }
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
