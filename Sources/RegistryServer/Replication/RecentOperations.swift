import RegistryCore
import RegistryStorage
import Synchronization

/// The operations most recently made durable, kept in memory so that peer links send them
/// without reading the journal back: each as the journal holds it (a ``LogRecord``: the bytes
/// the commit wrote, or those a peer's operation came in, which the journal wrote as they were;
/// ``LogWriter``), so that sending it encodes nothing again. A link that is further
/// behind than what is kept (a peer back from a long absence) reads the journal instead
/// (``LogReader``).
///
/// Reading the journal back cost the sending side more than the operations' own registration:
/// every link read and checked every journal entry, its own log's and the others' (`BENCHMARKS.md`,
/// "Cluster").
///
/// Memory is bounded for the whole node, whatever the number of logs (each start of each node
/// opens one): at most about ``capacity`` operations in all, the oldest runs dropped first, and
/// nothing that every member already holds (``keepOnly(unheldBy:)``). With no peer at all it
/// keeps nothing. The bytes kept are about the operations' own: a peer's batch applied in part
/// hands its operations over with their bytes copied out (``NodeState/appendApart(_:_:to:)``).
final class RecentOperations: Sendable {
    /// Operations kept in all: at least this many of the newest not yet held by every member
    /// (whole runs, a commit's segments, so up to a segment more).
    let capacity: Int

    private struct Chunk {
        let id: UInt64
        let operations: [LogRecord]
    }

    private struct Tail {
        /// Contiguous operations of one log, oldest first, in chunks as they were committed (a
        /// segment each).
        var chunks: [Chunk] = []
        var first: UInt64 { chunks.first?.operations.first?.sequence ?? 0 }
    }

    private struct State {
        var tails: [LogID: Tail] = [:]
        /// Every kept chunk, oldest first: (log, chunk ID); entries whose chunk went already are
        /// skipped when met.
        var order: [(log: LogID, id: UInt64)] = []
        var orderStart = 0
        var count = 0
        var nextID: UInt64 = 0
        /// False while the node has no peer: nothing is kept.
        var keeping = true

        mutating func removeFirstChunk(of log: LogID) {
            guard let removed = tails[log]?.chunks.first else { return }
            tails[log]!.chunks.removeFirst()
            count -= removed.operations.count
            if tails[log]!.chunks.isEmpty { tails[log] = nil }
        }

        /// Drops the oldest chunks while at least `capacity` operations would remain.
        mutating func trim(to capacity: Int) {
            while orderStart < order.count {
                let (log, id) = order[orderStart]
                if let oldest = tails[log]?.chunks.first, oldest.id == id {
                    guard count - oldest.operations.count >= capacity else { break }
                    removeFirstChunk(of: log)
                }
                orderStart += 1
            }
            if orderStart > 1_024, orderStart * 2 > order.count {
                order.removeFirst(orderStart)
                orderStart = 0
            }
        }
    }

    private let state = Mutex(State())

    init(capacity: Int = 262_144) {
        self.capacity = capacity
    }

    /// Whether operations are kept (the node has peers): a commit that would not be kept need not
    /// hand its records over.
    var isKeeping: Bool { state.withLock { $0.keeping } }

    /// Records operations just made durable: each run the records of one log in sequence order
    /// (a commit's segments), kept as it is.
    func append(runs: [[LogRecord]]) {
        guard runs.contains(where: { !$0.isEmpty }) else { return }
        state.withLock { state in
            guard state.keeping else { return }
            for run in runs {
                guard let first = run.first else { continue }
                let log = first.log
                // A run that does not follow what is kept (a restart, or remote operations that
                // arrived out of order across batches) starts the log's tail over.
                if let last = state.tails[log]?.chunks.last?.operations.last, last.sequence + 1 != first.sequence {
                    while state.tails[log] != nil { state.removeFirstChunk(of: log) }
                }
                state.nextID += 1
                state.tails[log, default: Tail()].chunks.append(Chunk(id: state.nextID, operations: run))
                state.order.append((log, state.nextID))
                state.count += run.count
            }
            state.trim(to: capacity)
        }
    }

    /// Keeps only what some member may still need: drops, for each log, the chunks every member
    /// holds (`floor`, as the retention floor says; a log it does not name is held by nobody).
    /// Nil (no peer): keeps nothing, and keeps nothing more until peers appear.
    func keepOnly(unheldBy floor: [LogID: UInt64]?) {
        state.withLock { state in
            guard let floor else {
                state = State()
                state.keeping = false
                return
            }
            state.keeping = true
            for (log, held) in floor {
                while let first = state.tails[log]?.chunks.first, let last = first.operations.last, last.sequence <= held {
                    state.removeFirstChunk(of: log)
                }
            }
        }
    }

    /// Operations kept now, in all logs.
    var count: Int { state.withLock { $0.count } }

    /// Up to `limit` operations of `log` from sequence `from`, in order; nil when `from` is not
    /// kept (older than the tail, or past it).
    func read(_ log: LogID, from: UInt64, atMost limit: Int) -> [LogRecord]? {
        state.withLock { state -> [LogRecord]? in
            guard let tail = state.tails[log], tail.first > 0, from >= tail.first else { return nil }
            var result = [LogRecord]()
            var next = from
            for chunk in tail.chunks where result.count < limit {
                guard let first = chunk.operations.first, let last = chunk.operations.last, last.sequence >= next else { continue }
                let taken = chunk.operations[Int(next - first.sequence)...].prefix(limit - result.count)
                result.append(contentsOf: taken)
                next = taken.last!.sequence + 1
            }
            return result.isEmpty ? nil : result
        }
    }
}
