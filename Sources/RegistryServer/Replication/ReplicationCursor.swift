import RegistryCore

/// What one sender knows of one receiver, as a plain value: what the receiver holds of every
/// log (from its welcome and acknowledgements), what has been sent, and the batches in flight.
/// It chooses the next run of operations to send, a log at a time in turn, and bounds the
/// batches in flight, so that a slow receiver pauses the sender instead of growing its memory.
struct ReplicationCursor: Sendable {
    /// A batch sent and not yet acknowledged.
    struct InFlight: Equatable, Sendable {
        let batchID: UInt64
        /// Nil for a probe (an empty batch).
        let log: LogID?
        let through: UInt64
        let operations: Int
        /// The HLC milliseconds of its first operation, for the replication lag.
        let oldestMillis: UInt64
        /// When it was sent.
        let sentMillis: UInt64
    }

    /// A run of one log to send: its operations from `from` through `through` at most (a batch
    /// may carry fewer).
    struct Run: Equatable, Sendable {
        let log: LogID
        let from: UInt64
        let through: UInt64
    }

    /// A protocol violation by the receiver: an acknowledgement of a batch never sent.
    struct UnknownBatch: Error, Equatable {
        let batchID: UInt64
    }

    /// What the receiver holds, as far as this sender knows.
    private(set) var receiverHolds: VersionVector
    /// For each log, the last sequence sent.
    private var sent: [LogID: UInt64] = [:]
    /// For each log, the last sequence of the newest batch of it that the receiver acknowledged
    /// (or that a snapshot this node sent brought). A receiver applies one session's batches in
    /// order, so what it holds beyond this when it acknowledges came from elsewhere; `sent`,
    /// which counts batches still in flight, would hide that.
    private var acknowledgedThrough: [LogID: UInt64] = [:]
    private(set) var inFlight: [InFlight] = []
    /// The most batches in flight at once.
    let window: Int
    private var nextBatchID: UInt64 = 1
    /// The log sent last, so that the next choice starts after it.
    private var lastLog: LogID?

    /// The node whose own logs go out at once; every other origin's are forwarded only once the
    /// receiver does not get them from elsewhere (see ``forwardingDue(_:held:local:nowMillis:)``).
    let ownOrigin: NodeID
    /// Normally an operation reaches every node from its origin within milliseconds. Forwarding
    /// it at once as well would send each operation to each node once per node of the cluster;
    /// waiting this long first sends it only where its origin does not reach.
    let forwardDelayMillis: UInt64
    /// How long a receiver may take to get what this node held of a log, before it is forwarded
    /// the log although it still gets some of it from elsewhere, unless it is catching up: ten
    /// forwarding delays.
    var slowDeliveryMillis: UInt64 { forwardDelayMillis * 10 }

    /// A log of another origin of which this node holds operations that the receiver lacks: the
    /// waits before forwarding it.
    struct Lack: Sendable {
        /// When the wait began, or the receiver last said it had got some of the log from
        /// elsewhere (ms, ``lastHeardMillis`` then).
        var grewSince: UInt64
        /// What the receiver held of the log then.
        var held: UInt64
        /// What this node held of the log at `targetSince`, which the receiver is to reach.
        var target: UInt64
        /// When this node held `target` (ms).
        var targetSince: UInt64
        /// What the receiver held of the log at `targetSince`.
        var heldAtTarget: UInt64
    }

    /// The logs of other origins that the receiver lacks operations of, as far as its
    /// acknowledgements tell. Under load a receiver always lacks the newest operations of a log
    /// that its origin is still delivering: what decides forwarding is whether it still gets the
    /// log from elsewhere, and soon enough, not whether it lacks some.
    private var lacks: [LogID: Lack] = [:]
    /// What this node held of each other origin's log over the last forwarding delay: only what
    /// it has held that long is forwarded.
    private var holding: [LogID: HoldingHistory] = [:]
    /// When the receiver's holdings were last learned (ms).
    private(set) var lastHeardMillis: UInt64
    /// When the newest batch that the receiver has acknowledged was sent (ms), nil before the
    /// first: what it holds is known as of that moment or later, since it acknowledged having
    /// read it (``CatchUpBarrier`` waits for an answer to a batch sent after it asked).
    private(set) var answeredSentMillis: UInt64?
    /// Set by ``wantProbe()``: a probe goes out once nothing is in flight, unless a batch goes
    /// first (its acknowledgement answers as well).
    private var probeWanted = false

    init(receiverHolds: VersionVector, window: Int, ownOrigin: NodeID, forwardDelayMillis: UInt64, nowMillis: UInt64) {
        precondition(window > 0)
        self.receiverHolds = receiverHolds
        self.window = window
        self.ownOrigin = ownOrigin
        self.forwardDelayMillis = forwardDelayMillis
        self.lastHeardMillis = nowMillis
    }

    /// Whether another batch may be sent now.
    var canSend: Bool { inFlight.count < window }

    /// The next run to send: a log of `local` (what this node holds durably) with operations
    /// neither held by the receiver nor sent; nil when there is none, none is due yet, or the
    /// window is full. This node's own logs are due at once, through all it holds. Another
    /// origin's are due once the receiver, lacking some of it, does not get it from elsewhere
    /// (see ``forwardingDue(_:held:local:nowMillis:)``), and then only through what this node has
    /// held for ``forwardDelayMillis``: the origin's own copies, one hop from the receiver where
    /// this node's are two, normally arrive first, and show that it gets the log from elsewhere
    /// again.
    mutating func nextRun(local: VersionVector, nowMillis: UInt64) -> Run? {
        var candidates = [Run]()
        for entry in local.logs {
            let held = receiverHolds[entry.log]
            let from = max(held, sent[entry.log] ?? 0) + 1
            let forwarded = entry.log.origin != ownOrigin
            var through = entry.sequence
            if forwarded {
                through = holding[entry.log, default: HoldingHistory(span: forwardDelayMillis, spacing: max(1, forwardDelayMillis / 10))]
                    .heldForSpan(holding: entry.sequence, nowMillis: nowMillis)
            }
            guard entry.sequence >= from else {
                if entry.sequence <= held { lacks[entry.log] = nil }
                continue
            }
            if forwarded {
                guard forwardingDue(entry.log, held: held, local: entry.sequence, nowMillis: nowMillis), through >= from else { continue }
            }
            candidates.append(Run(log: entry.log, from: from, through: through))
        }
        guard canSend else { return nil }
        guard let lastLog else { return candidates.first }
        return candidates.first { $0.log > lastLog } ?? candidates.first
    }

    /// Whether another origin's `log`, of which the receiver holds through `held` and this node
    /// through `local`, more, is to be forwarded now: when a report of the receiver's (an
    /// acknowledgement) ``forwardDelayMillis`` or more after it last said it got some of the log
    /// from elsewhere (its origin, most likely) still says it got none; or when a report
    /// ``slowDeliveryMillis`` after this node held some operations says the receiver lacks them
    /// still, and got less of the log meanwhile than this node did (it is not catching up).
    /// Only reports count: a report that is late is not taken for a receiver that got nothing.
    ///
    /// The first covers a receiver cut off from the origin; the second one that the origin feeds
    /// slower than the log grows, whose holding grows but falls further behind. A receiver that
    /// its origin keeps up to date, as under load, where it always lacks the newest operations,
    /// meets neither, and nor does one far behind that its origin is catching up. What this
    /// node's own batches brought is not getting the log from elsewhere, so a forwarded log goes
    /// on at the pace of acknowledgements, not a batch each delay, until the receiver holds more
    /// of it than the batches of this node it acknowledged: as ``nextRun(local:nowMillis:)``
    /// forwards only what this node has held for the delay, that is as soon as the origin's own
    /// copies reach the receiver within the delay again. Once the receiver holds all that this
    /// node does, operations that arrive later wait again.
    private mutating func forwardingDue(_ log: LogID, held: UInt64, local: UInt64, nowMillis: UInt64) -> Bool {
        guard var lack = lacks[log] else {
            lacks[log] = Lack(grewSince: nowMillis, held: held, target: local, targetSince: nowMillis, heldAtTarget: held)
            return forwardDelayMillis == 0
        }
        if held > max(lack.held, acknowledgedThrough[log] ?? 0) {
            (lack.grewSince, lack.held) = (lastHeardMillis, held)
        }
        let reached = held >= lack.target
        // Both only grow; guarded all the same, so that a wrong caller cannot trap the link.
        let catchingUp = (held > lack.heldAtTarget ? held - lack.heldAtTarget : 0) >= (local > lack.target ? local - lack.target : 0)
        let slow = lastHeardMillis >= lack.targetSince + slowDeliveryMillis
        if reached || (slow && catchingUp) {
            (lack.target, lack.targetSince, lack.heldAtTarget) = (local, nowMillis, held)
        }
        lacks[log] = lack
        return lastHeardMillis >= lack.grewSince + forwardDelayMillis || lastHeardMillis >= lack.targetSince + slowDeliveryMillis
    }

    /// Whether to ask the receiver what it holds (an empty batch, whose acknowledgement says):
    /// nothing is in flight, and this node holds operations of another origin that the receiver
    /// lacked when it last said, half the forwarding delay ago or longer.
    /// Or a caller wants to know what the receiver holds now (``wantProbe()``).
    func probeDue(nowMillis: UInt64) -> Bool {
        inFlight.isEmpty && (probeWanted || (!lacks.isEmpty && nowMillis >= lastHeardMillis + forwardDelayMillis / 2))
    }

    /// Asks for the receiver's holdings as of now: the next batch sent, or a probe as soon as
    /// nothing is in flight, is acknowledged with them (``answeredSentMillis``).
    mutating func wantProbe() {
        probeWanted = true
    }

    /// Records a batch of `operations` operations of `log`, through sequence `through`, as sent;
    /// returns its batch ID.
    mutating func sending(log: LogID, through: UInt64, operations: Int, oldestMillis: UInt64, nowMillis: UInt64 = 0) -> UInt64 {
        let batchID = nextBatchID
        nextBatchID += 1
        sent[log] = through
        lastLog = log
        probeWanted = false
        inFlight.append(
            InFlight(batchID: batchID, log: log, through: through, operations: operations, oldestMillis: oldestMillis, sentMillis: nowMillis))
        return batchID
    }

    /// When the oldest batch in flight was sent; nil when none is.
    var oldestSentMillis: UInt64? { inFlight.first?.sentMillis }

    /// Records an empty batch, sent to learn what the receiver holds; returns its batch ID.
    mutating func probing(nowMillis: UInt64) -> UInt64 {
        let batchID = nextBatchID
        nextBatchID += 1
        probeWanted = false
        inFlight.append(InFlight(batchID: batchID, log: nil, through: 0, operations: 0, oldestMillis: nowMillis, sentMillis: nowMillis))
        return batchID
    }

    /// The receiver acknowledged `batchID`, now holding `held` (what it holds of every log).
    mutating func acknowledged(_ batchID: UInt64, held: VersionVector, nowMillis: UInt64) throws(UnknownBatch) {
        guard let index = inFlight.firstIndex(where: { $0.batchID == batchID }) else { throw UnknownBatch(batchID: batchID) }
        let batch = inFlight.remove(at: index)
        if let log = batch.log {
            receiverHolds.recordAll(through: max(receiverHolds[log], batch.through), in: log)
            acknowledgedThrough[log] = max(acknowledgedThrough[log] ?? 0, batch.through)
        }
        answeredSentMillis = max(answeredSentMillis ?? 0, batch.sentMillis)
        learned(held, nowMillis: nowMillis)
    }

    /// The receiver installed a snapshot this node sent, and now holds `held`. What the snapshot
    /// brought counts as sent by this node, not as the receiver getting logs from elsewhere, so
    /// forwarding what follows it does not wait again.
    mutating func installedSnapshot(holding held: VersionVector, nowMillis: UInt64) {
        for (log, sequence) in held.logs {
            sent[log] = max(sent[log] ?? 0, sequence)
            acknowledgedThrough[log] = max(acknowledgedThrough[log] ?? 0, sequence)
        }
        learned(held, nowMillis: nowMillis)
    }

    /// The receiver said it holds `held`.
    private mutating func learned(_ held: VersionVector, nowMillis: UInt64) {
        lastHeardMillis = nowMillis
        for (log, sequence) in held.logs where sequence > receiverHolds[log] {
            receiverHolds.recordAll(through: sequence, in: log)
        }
    }

    /// Operations this node holds that the receiver is not known to hold.
    func backlog(local: VersionVector) -> UInt64 {
        receiverHolds.backlog(behind: local)
    }

    /// The HLC milliseconds of the oldest operation sent and not acknowledged.
    var oldestUnacknowledgedMillis: UInt64? {
        inFlight.filter { $0.log != nil }.map(\.oldestMillis).min()
    }
}

extension VersionVector {
    /// Operations `other` holds that this vector does not.
    func backlog(behind other: VersionVector) -> UInt64 {
        other.logs.reduce(0) { $0 + ($1.sequence > self[$1.log] ? $1.sequence - self[$1.log] : 0) }
    }

    /// For each log, the least that every one of `vectors` holds; nil for no vectors.
    static func floor(of vectors: [VersionVector]) -> [LogID: UInt64]? {
        guard let first = vectors.first else { return nil }
        var floor = [LogID: UInt64]()
        for (log, sequence) in first.logs { floor[log] = vectors.dropFirst().reduce(sequence) { min($0, $1[log]) } }
        return floor
    }
}
