import RegistryCore

/// What one sender knows of one receiver, as a plain value: what the receiver holds of every
/// log (from its welcome and acknowledgements), what has been sent, and the batches in flight.
/// It chooses the next run of operations to send, a log at a time in turn, and bounds the
/// batches in flight, so that a slow receiver pauses the sender instead of growing its memory.
struct ReplicationCursor: Sendable {
    /// A batch sent and not yet acknowledged.
    struct InFlight: Equatable, Sendable {
        let batchID: UInt64
        let log: VersionVector.Log
        let through: UInt64
        let operations: Int
        /// The HLC milliseconds of its first operation, for the replication lag.
        let oldestMillis: UInt64
    }

    /// A protocol violation by the receiver: an acknowledgement of a batch never sent.
    struct UnknownBatch: Error, Equatable {
        let batchID: UInt64
    }

    /// What the receiver holds, as far as this sender knows.
    private(set) var receiverHolds: VersionVector
    /// For each log, the last sequence sent.
    private var sent: [VersionVector.Log: UInt64] = [:]
    private(set) var inFlight: [InFlight] = []
    /// The most batches in flight at once.
    let window: Int
    private var nextBatchID: UInt64 = 1
    /// The log sent last, so that the next choice starts after it.
    private var lastLog: VersionVector.Log?

    init(receiverHolds: VersionVector, window: Int) {
        precondition(window > 0)
        self.receiverHolds = receiverHolds
        self.window = window
    }

    /// Whether another batch may be sent now.
    var canSend: Bool { inFlight.count < window }

    /// The next run to send: a log of `local` (what this node holds durably) with operations
    /// neither held by the receiver nor sent, and the sequence to start from; nil when there is
    /// none or the window is full.
    func nextRun(local: VersionVector) -> (log: VersionVector.Log, from: UInt64)? {
        guard canSend else { return nil }
        let candidates = local.logs.compactMap { entry -> (log: VersionVector.Log, from: UInt64)? in
            let from = max(receiverHolds[entry.log], sent[entry.log] ?? 0) + 1
            return entry.sequence >= from ? (entry.log, from) : nil
        }
        guard let lastLog else { return candidates.first }
        return candidates.first { $0.log > lastLog } ?? candidates.first
    }

    /// Records a batch of `operations` operations of `log`, through sequence `through`, as sent;
    /// returns its batch ID.
    mutating func sending(log: VersionVector.Log, through: UInt64, operations: Int, oldestMillis: UInt64) -> UInt64 {
        let batchID = nextBatchID
        nextBatchID += 1
        sent[log] = through
        lastLog = log
        inFlight.append(InFlight(batchID: batchID, log: log, through: through, operations: operations, oldestMillis: oldestMillis))
        return batchID
    }

    /// The receiver acknowledged `batchID`, now holding `held`.
    mutating func acknowledged(_ batchID: UInt64, held: VersionVector) throws(UnknownBatch) {
        guard let index = inFlight.firstIndex(where: { $0.batchID == batchID }) else { throw UnknownBatch(batchID: batchID) }
        let batch = inFlight.remove(at: index)
        receiverHolds.recordAll(through: max(receiverHolds[batch.log], batch.through), in: batch.log)
        for (log, sequence) in held.logs where sequence > receiverHolds[log] {
            receiverHolds.recordAll(through: sequence, in: log)
        }
    }

    /// Operations this node holds that the receiver is not known to hold.
    func backlog(local: VersionVector) -> UInt64 {
        local.logs.reduce(0) { $0 + ($1.sequence > receiverHolds[$1.log] ? $1.sequence - receiverHolds[$1.log] : 0) }
    }

    /// The HLC milliseconds of the oldest operation sent and not acknowledged.
    var oldestUnacknowledgedMillis: UInt64? {
        inFlight.map(\.oldestMillis).min()
    }
}
