import Logging
import RegistryCore
import RegistryWire

/// Applies a peer's replicated batch of operations, its one job: under the engine's one lock
/// through ``NodeState/applyRemoteBatch(_:wallMillis:applied:)``, made durable through the same
/// group commit as client writes (``CommitPipeline``), which then sends the acknowledgement. It
/// submits again the client groups the batch lets through (``ClientRequests/wakeCausalWaiters(_:)``)
/// and counts the batches refused for clock skew. Peer connections call it on their event loops.
final class PeerBatches: Sendable {
    private let core: SharedCore
    private let pipeline: CommitPipeline
    /// Where groups that a batch lets through are submitted again.
    private let requests: ClientRequests
    private let counters: ServerCounters
    private let logger: Logger
    private let wallClock: @Sendable () -> UInt64

    init(
        core: SharedCore, pipeline: CommitPipeline, requests: ClientRequests, counters: ServerCounters, logger: Logger,
        wallClock: @escaping @Sendable () -> UInt64
    ) {
        (self.core, self.pipeline, self.requests, self.counters, self.logger, self.wallClock) = (
            core, pipeline, requests, counters, logger, wallClock
        )
    }

    /// Applies a peer's batch of operations through the one remote path
    /// (``NodeState/applyRemoteBatch(_:wallMillis:applied:)``) and makes what it applied durable
    /// through the same group commit as client writes. `deliver` gets what this node then holds
    /// of the batch's logs, once that is durable (as is everything applied before it), or why
    /// the batch was refused whole.
    func submit(
        _ operations: [LoggedOperation], deliver: @escaping @Sendable (Result<[LogPosition], WireError>) -> Void
    ) {
        let wall = wallClock()
        var woken = [CausalWaits<RegistryEngine.CausalWaiter>.Released]()
        let (result, waits) = core.withLockedValue { core -> (Result<[LogPosition], WireError>, Bool) in
            if let failure = core.commits.failure { return (.failure(failure), false) }
            let undurable = core.commits.holdsUndurable
            let before = core.commits.pendingOperations.count
            let refusal = core.commits.recordOperations { pending in
                core.node.applyRemoteBatch(operations, wallMillis: wall, applied: &pending)
            }
            // A refusal waits for what is being made durable too, so that the peer hears of its
            // earlier batches (acknowledged) before it hears of this one (refused).
            if let refusal { return (.failure(refusal.wireError), undurable) }
            woken = core.coveredCausalWaiters()
            // What the node holds of every log, all of it durable by the time the answer goes.
            return (.success(core.node.versionVector.positions), undurable || core.commits.pendingOperations.count > before)
        }
        requests.wakeCausalWaiters(woken)
        if case .failure(let error) = result, error.code == .clockSkew {
            counters.record(error: .clockSkew)
            counters.hlcRefusals.increment()
            logger.warning("refused a peer's batch: clock skew", metadata: ["error": "\(error.message)"])
        }
        pipeline.enqueue(.peerBatch(result, deliver: deliver), waits: waits)
    }
}
