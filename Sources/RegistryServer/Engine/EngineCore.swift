import NIOConcurrencyHelpers
import RegistryCore

/// What requests and commits share, under the engine's one lock: the node's state, the commits
/// not durable yet, what is durable, when the next snapshot is due, and the requests held for
/// their causal tokens. Who changes what: ``ClientRequests``, ``PeerBatches``, ``OwnMembership``
/// and the engine's seeding of the vendor rules at a first start change `node` and record
/// operations in `commits` (client requests draw device IDs from `generator`);
/// the commit pipeline takes them from `commits` and changes `durable` and `snapshotPolicy`; a
/// peer's snapshot install, on the pipeline's queue, replaces `node` and raises `durable`;
/// `causalWaits` is parked by ``CausalHolding`` and released wherever `node` learns more. The
/// commit bookkeeping changes only through ``CommitStateMachine``'s events.
struct EngineCore {
    var node: NodeState
    var generator = BufferedRandom()
    /// What is not durable yet, who waits for it, and whether a commit pass runs.
    var commits = CommitStateMachine<RegistryEngine.Completion>()
    var durable: DurableState
    /// When the next snapshot is due.
    var snapshotPolicy: SnapshotPolicy
    /// When snapshots are due so that forgotten devices' bytes leave the disk in time.
    var erasure: ErasureSchedule
    /// What every member holds (``RegistryEngine/setRetentionFloor(_:)``), left out of answers'
    /// tokens; nil when the node has no peers. Until the cluster sets it: nothing, so tokens name
    /// every log.
    var causalFloor: [LogID: UInt64]? = [:]
    /// Requests whose causal tokens name operations not held yet.
    var causalWaits = CausalWaits<RegistryEngine.CausalWaiter>()

    /// Takes the held groups that the node's vector now covers.
    mutating func coveredCausalWaiters() -> [CausalWaits<RegistryEngine.CausalWaiter>.Released] {
        causalWaits.isEmpty ? [] : causalWaits.covered(by: node.versionVector)
    }
}

/// The engine's lock and what it guards. A pthread mutex: Synchronization.Mutex is a
/// priority-inheritance futex on Linux, whose contended path costs a kernel round trip every time.
typealias SharedCore = NIOLockedValueBox<EngineCore>
