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

    /// Records per segment row at most, so that a long commit pass (a stalled disk) still
    /// writes rows of about a megabyte rather than one huge blob.
    static let segmentRecords = 4096

    /// Encodes and durably appends `operations`, with the clock, in one transaction: the
    /// operations of each (origin, epoch) run become ``LogSegment`` rows.
    func write(_ operations: [LoggedOperation], clock: HLCTimestamp) -> Result<UInt64, StorageError> {
        dispatchPrecondition(condition: .onQueue(queue))
        guard let log else { return .failure(.corrupt("the log is closed")) }
        var segments = [LogSegment]()
        var buffer = ByteBuffer()
        for operation in operations {
            let startsSegment = segments.last.map {
                $0.origin != operation.origin.value || $0.epoch != operation.epoch || $0.count == Self.segmentRecords
            }
            if startsSegment ?? true {
                segments.append(
                    LogSegment(
                        origin: operation.origin.value, epoch: operation.epoch,
                        reservingBytes: 200 * min(operations.count, Self.segmentRecords)))
            }
            buffer.clear()
            do {
                try OperationCodec.encode(operation.operation, into: &buffer)
            } catch {
                return .failure(.corrupt("cannot encode operation \(operation.sequence): \(error)"))
            }
            segments[segments.count - 1].append(
                sequence: operation.sequence, hlc: operation.timestamp.rawValue, payload: buffer.readableBytesView)
        }
        do {
            try log.append(segments, clock: clock.rawValue)
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
