import Dispatch
import NIOCore
import RegistryCore
import RegistryStorage
import RegistryWire

/// Owns the operation log and writes to it on one serial queue.
///
/// `@unchecked Sendable`: its only mutable state, `log`, is touched solely by closures that run
/// on `queue` (a serial DispatchQueue); `init` hands the log over before any closure exists.
final class LogWriter: @unchecked Sendable {
    let queue = DispatchQueue(label: "registry.log-writer")
    private var log: OperationLog?

    init(log: OperationLog) {
        self.log = log
    }

    /// Encodes and durably appends `operations`, with the clock, in one transaction. Call on `queue`.
    func write(_ operations: [LoggedOperation], clock: HLCTimestamp) -> Result<UInt64, StorageError> {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let log else { return .failure(.corrupt("the log is closed")) }
        var records = [LogRecord]()
        records.reserveCapacity(operations.count)
        var buffer = ByteBuffer()
        for operation in operations {
            buffer.clear()
            do {
                try OperationCodec.encode(operation.operation, into: &buffer)
            } catch {
                return .failure(.corrupt("cannot encode operation \(operation.sequence): \(error)"))
            }
            records.append(
                LogRecord(
                    origin: operation.origin.value, epoch: operation.epoch, sequence: operation.sequence,
                    hlc: operation.timestamp.rawValue, payload: Array(buffer.readableBytesView)))
        }
        do {
            try log.append(records, clock: clock.rawValue)
            return .success(log.recordCount)
        } catch {
            return .failure(error)
        }
    }

    /// Closes the log (and releases the data directory's lock) after queued writes finish.
    func close() {
        queue.sync { log = nil }
    }
}
