import Dispatch
import NIOConcurrencyHelpers
import RegistryCore
import RegistryStorage
import RegistryWire

/// Rebuilds a node's memory from its durable log at start-up, on two threads: a reader reads and
/// decodes the log in chunks while the caller applies the chunks already decoded. Decoding was a
/// third of a single-threaded replay and applying the rest, so restart takes about as long as
/// applying alone.
///
/// Applying stays on one thread and in log order, exactly as a single-threaded replay would.
enum LogReplay {
    /// What a replay found.
    struct Outcome {
        var registry: RegistryState
        /// The newest HLC of any record, or the persisted clock when that is newer.
        var newest: HLCTimestamp
        /// The last sequence this node's own (origin, epoch) wrote, 0 when none.
        var lastOwnSequence: UInt64
        /// What the log holds of every (origin, epoch).
        var versionVector: VersionVector
    }

    /// Operations decoded per hand-over.
    static let chunkSize = 4096
    /// Decoded chunks that may wait for the applier: bounds the memory a slow apply can pile up.
    static let chunksAhead = 4

    /// Replays `log`, whose own records are those of `identity`. Throws
    /// ``StorageError/corrupt(_:)`` for a record that does not decode, naming it.
    static func run(_ log: OperationLog, identity: NodeIdentity, expectedDevices: Int = 0) throws(StorageError) -> Outcome {
        let handoff = ChunkHandoff(capacity: chunksAhead)
        let lease = LogLease(log)
        DispatchQueue(label: "registry.log-replay").async {
            // The reader lets go of the log before it reports: the log (and the data directory's
            // lock) must belong to the caller alone once the replay returns.
            let result = lease.consume { decodeAll($0, into: handoff) }
            handoff.put(.finished(result))
        }
        var registry = RegistryState(expectedDevices: expectedDevices)
        while true {
            switch handoff.take() {
            case .operations(let operations):
                for operation in operations { registry.apply(operation) }
            case .finished(.success(let (newestRecord, vector))):
                // The reader has finished with the log: it is this thread's again.
                return Outcome(
                    registry: registry, newest: max(newestRecord, HLCTimestamp(rawValue: try log.persistedClock())),
                    lastOwnSequence: vector[VersionVector.Log(origin: NodeID(trusted: identity.nodeID), epoch: identity.epoch)],
                    versionVector: vector)
            case .finished(.failure(let error)):
                throw error
            }
        }
    }

    /// Reads and decodes every record, handing over chunks of ``chunkSize`` operations, and
    /// returns the newest HLC of any record and what the log holds of each (origin, epoch).
    /// Records come ordered by (origin, epoch, sequence); a log whose sequence jumps has lost
    /// operations, and the node refuses to serve a state with holes.
    private static func decodeAll(
        _ log: OperationLog, into handoff: ChunkHandoff
    ) -> Result<(HLCTimestamp, VersionVector), StorageError> {
        var newest = HLCTimestamp.zero
        var chunk = [Operation]()
        chunk.reserveCapacity(chunkSize)
        var vector = VersionVector()
        // The log being read and its last sequence, recorded in the vector when the next begins.
        var current: (origin: String, epoch: UInt64, last: UInt64)?
        func finishCurrent() {
            if let current { vector.recordAll(through: current.last, in: VersionVector.Log(origin: NodeID(trusted: current.origin), epoch: current.epoch)) }
        }
        do {
            try log.forEach { (record) throws(StorageError) in
                if current?.origin != record.origin || current?.epoch != record.epoch {
                    finishCurrent()
                    current = (record.origin, record.epoch, 0)
                }
                guard record.sequence == current!.last + 1 else {
                    throw .corrupt(
                        "the log of \(record.origin)/\(record.epoch) goes from operation \(current!.last) to \(record.sequence): operations are missing")
                }
                current!.last = record.sequence
                do {
                    chunk.append(try OperationCodec.decode(record.payload))
                } catch {
                    throw .corrupt("\(record.origin)/\(record.epoch)/\(record.sequence): \(error)")
                }
                newest = max(newest, HLCTimestamp(rawValue: record.hlc))
                if chunk.count == chunkSize {
                    handoff.put(.operations(chunk))
                    chunk.removeAll(keepingCapacity: true)
                }
            }
        } catch {
            return .failure(error)
        }
        finishCurrent()
        if !chunk.isEmpty { handoff.put(.operations(chunk)) }
        return .success((newest, vector))
    }
}

/// One hand-over from the reader to the applier.
enum ReplayItem: Sendable {
    case operations([Operation])
    /// The reader's last item: after it, the reader no longer touches the log.
    case finished(Result<(HLCTimestamp, VersionVector), StorageError>)
}

/// A bounded first-in, first-out hand-over between one producer and one consumer thread, which
/// block (on semaphores) when it is full or empty.
final class ChunkHandoff: Sendable {
    private let free: DispatchSemaphore
    private let filled = DispatchSemaphore(value: 0)
    private let items = NIOLockedValueBox<[ReplayItem]>([])

    init(capacity: Int) {
        free = DispatchSemaphore(value: capacity)
    }

    func put(_ item: ReplayItem) {
        free.wait()
        items.withLockedValue { $0.append(item) }
        filled.signal()
    }

    func take() -> ReplayItem {
        filled.wait()
        let item = items.withLockedValue { $0.removeFirst() }
        free.signal()
        return item
    }
}

/// Lends the (not thread-safe) log to the replay's reader, once.
///
/// `@unchecked Sendable`: its one mutable field is read and cleared only by ``consume(_:)``,
/// which only the reader calls, once. ``LogReplay/run(_:identity:)`` touches the log only after
/// taking the reader's `.finished` item, which the reader sends after `consume` has returned,
/// so the two threads never use the log at the same time; the semaphore hand-over orders them.
private final class LogLease: @unchecked Sendable {
    private var log: OperationLog?

    init(_ log: OperationLog) {
        self.log = log
    }

    /// Runs `body` with the log and drops the lease's reference to it.
    func consume<Result>(_ body: (OperationLog) -> Result) -> Result {
        guard let log else { preconditionFailure("a log lease is consumed once") }
        self.log = nil
        return body(log)
    }
}
