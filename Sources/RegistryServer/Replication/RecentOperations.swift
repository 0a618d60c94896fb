import RegistryCore
import Synchronization

/// The operations most recently made durable, per log, kept in memory so that peer links send
/// them without reading the journal back. A link that is further behind than what is kept (a
/// peer back from a long absence) reads the journal instead (``LogReader``).
///
/// Reading the journal back cost the sending side more than the operations' own registration:
/// every link read and checked every journal entry, its own log's and the others' (`BENCHMARKS.md`,
/// "Cluster").
final class RecentOperations: Sendable {
    /// Operations kept per log: at least this many of the newest (whole commits, so up to a
    /// commit more); a few seconds of a busy node's writes.
    let capacityPerLog: Int

    private struct Tail {
        /// Contiguous operations of one log, oldest first, in chunks as they were committed.
        var chunks: [[LoggedOperation]] = []
        var count = 0
        var first: UInt64 { chunks.first?.first?.sequence ?? 0 }
    }

    private let tails = Mutex<[VersionVector.Log: Tail]>([:])

    init(capacityPerLog: Int = 262_144) {
        self.capacityPerLog = capacityPerLog
    }

    /// Records operations just made durable (a commit's, in log order within each log).
    func append(_ operations: [LoggedOperation]) {
        guard !operations.isEmpty else { return }
        let runs = operations.runsByLog.map { ($0.log, Array(operations[$0.range])) }
        tails.withLock { tails in
            for (log, run) in runs {
                var tail = tails[log] ?? Tail()
                // A run that does not follow what is kept (a restart, or remote operations that
                // arrived out of order across batches) starts the tail over.
                if let last = tail.chunks.last?.last, last.sequence + 1 != run[0].sequence { tail = Tail() }
                tail.chunks.append(run)
                tail.count += run.count
                while tail.count - (tail.chunks.first?.count ?? 0) >= capacityPerLog {
                    tail.count -= tail.chunks.removeFirst().count
                }
                tails[log] = tail
            }
        }
    }

    /// Up to `limit` operations of `log` from sequence `from`, in order; nil when `from` is not
    /// kept (older than the tail, or past it).
    func read(_ log: VersionVector.Log, from: UInt64, atMost limit: Int) -> [LoggedOperation]? {
        tails.withLock { tails -> [LoggedOperation]? in
            guard let tail = tails[log], tail.first > 0, from >= tail.first else { return nil }
            var result = [LoggedOperation]()
            var next = from
            for chunk in tail.chunks where result.count < limit {
                guard let first = chunk.first, let last = chunk.last, last.sequence >= next else { continue }
                let taken = chunk[Int(next - first.sequence)...].prefix(limit - result.count)
                result.append(contentsOf: taken)
                next = taken.last!.sequence + 1
            }
            return result.isEmpty ? nil : result
        }
    }
}
