import RegistryCore
import RegistryStorage
import RegistryWire

/// Follows one log, (origin, epoch), through the node's journal from a sequence onwards while the
/// node keeps committing: each ``next(atMost:)`` returns the following operations in order and
/// without gaps, decoded, reading only what is durable and one journal entry at a time. A
/// position that trimming removed is refused with ``JournalReadError/trimmed(log:requested:trimmedThrough:)``:
/// the caller takes a snapshot instead. Replication streams to its peers through it.
public final class LogReader {
    private let reader: JournalReader

    init(_ reader: JournalReader) {
        self.reader = reader
    }

    /// The sequence of the next operation returned.
    public var nextSequence: UInt64 { reader.nextSequence }

    /// The next records as the journal holds them, the operations still encoded: what
    /// replication sends on (the receiver decodes and checks them). About `limit` at most; a
    /// whole journal entry's worth may exceed it.
    public func nextRecords(atMost limit: Int) throws(JournalReadError) -> [LogRecord] {
        try reader.next(atMost: limit)
    }

    public func next(atMost limit: Int) throws(JournalReadError) -> [LoggedOperation] {
        let records = try reader.next(atMost: limit)
        let origin = reader.log.origin
        var operations = [LoggedOperation]()
        operations.reserveCapacity(records.count)
        for record in records {
            do {
                operations.append(
                    LoggedOperation(
                        origin: origin, epoch: record.epoch, sequence: record.sequence, timestamp: HLCTimestamp(rawValue: record.hlc),
                        operation: try OperationCodec.decode(record.payload)))
            } catch {
                throw .storage(.corrupt("operation \(reader.log)/\(record.sequence) does not decode: \(error)"))
            }
        }
        return operations
    }
}
