import Dispatch
import Platform
import RegistryCore
import RegistryWire
import Synchronization

/// The one owner of writes that wait for peers (`--ack-replicas`): how many peers a group of
/// requests needs, holding its answers until that many hold this node's log through its writes
/// (``ReplicaAcknowledgements`` decides), and answering a retryable error for those whose
/// `--replica-timeout` passes first. The engine hands it durable answers; peer links tell it what
/// peers hold.
final class ReplicaWaits: Sendable {
    /// Peers a write must reach before its answer, unless the request says (`--ack-replicas`).
    let defaultAckReplicas: Int
    /// How long a write waits for its replicas before a retryable error (`--replica-timeout`).
    let timeoutMillis: UInt64
    private let waits = Mutex(ReplicaAcknowledgements<RegistryEngine.Waiter>())
    private let counters: ServerCounters
    /// The clock of the deadlines: monotonic, as the timer that checks them is (see
    /// ``CausalHolding/deadlineClock``).
    private let deadlineClock: @Sendable () -> UInt64

    init(
        defaultAckReplicas: Int, timeoutMillis: UInt64, counters: ServerCounters,
        deadlineClock: @escaping @Sendable () -> UInt64 = SystemClock.monotonicMillis
    ) {
        self.defaultAckReplicas = defaultAckReplicas
        self.timeoutMillis = timeoutMillis
        self.counters = counters
        self.deadlineClock = deadlineClock
    }

    /// The peers the writes of `frames` must reach before their answers: the most any write
    /// frame asks for, or the node's default. A write frame that asks for more peers than the
    /// node streams to (`peers`, asked only when needed) is refused (`prepared` is changed), as
    /// it could never be satisfied.
    func wanted(by frames: [ClientFrame], prepared: inout [NodeState.Prepared], peers: () -> Int) -> Int {
        var wanted = 0
        for index in frames.indices {
            switch frames[index].body {
            case .register, .registerBatch, .bind, .unbind, .forget, .vendor: break
            default: continue
            }
            let asked = Int(frames[index].ackReplicas ?? UInt32(defaultAckReplicas))
            guard asked > 0 else { continue }
            let streamedTo = peers()
            guard asked <= streamedTo else {
                prepared[index] = .refused(
                    WireError(
                        code: .invalidArgument,
                        message: "ack_replicas \(asked) exceeds the \(streamedTo) peer\(streamedTo == 1 ? "" : "s") this node streams to"))
                continue
            }
            wanted = max(wanted, asked)
        }
        return wanted
    }

    /// Holds a durable write's answer until enough peers hold it, or its timeout passes.
    func hold(_ waiter: RegistryEngine.Waiter) {
        let deadline = deadlineClock() + timeoutMillis
        let ready = waits.withLock { $0.wait(waiter, through: waiter.ownThrough, needed: waiter.replicas, deadlineMillis: deadline) }
        if let ready { return finish(ready) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeoutMillis) + 1)) {
            let expired = self.waits.withLock { $0.expired(nowMillis: self.deadlineClock()) }
            for waiter in expired { self.finish(waiter, timedOut: true) }
        }
    }

    /// `peer` holds this node's own log through `sequence` (or, `restated`, welcomed this node
    /// saying so): answers the writes that now have their replicas.
    func peer(_ peer: NodeID, holdsThrough sequence: UInt64, restated: Bool) {
        guard sequence > 0 || restated else { return }
        let ready = waits.withLock { $0.peer(peer, holdsThrough: sequence, restated: restated) }
        for waiter in ready { finish(waiter) }
    }

    private func finish(_ waiter: RegistryEngine.Waiter, timedOut: Bool = false) {
        var answers = waiter.answers
        if timedOut {
            let error = WireError(
                code: .replicationTimeout,
                message: "durable on this node, but fewer than \(waiter.replicas) peers confirmed it within \(timeoutMillis) ms; it is kept and still replicates",
                retryable: true)
            answers = RegistryEngine.Answers(requestIDs: answers.requestIDs, decisions: answers.requestIDs.map { _ in .answer(.error(error)) })
        }
        counters.record(answers.decisions, submittedNanos: waiter.submittedNanos)
        waiter.deliver(answers)
    }
}
