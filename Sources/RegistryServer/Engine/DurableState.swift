import RegistryCore
import RegistryWire

/// What is durable on this node, kept in one place: every log's highest durable sequence (what
/// peers may be sent, what a snapshot may cover), how many operations that is, and the commits
/// that made it so. It changes only on the writer's queue: after a journal write
/// (``committed(_:syncMicros:)``, the commit pipeline) and when a peer's snapshot is installed
/// (``installed(_:)``, ``SnapshotInstall``, between two commits).
struct DurableState {
    private(set) var vector: VersionVector
    /// Operations durable in the journal or covered by a snapshot.
    private(set) var operations: UInt64
    /// Group commits since start-up.
    private(set) var commits: UInt64 = 0
    /// How long each commit's journal write and sync took.
    private(set) var commitLatency = LatencyBuckets()

    /// What start-up recovered (the newest snapshot and the journal after it).
    init(recovered vector: VersionVector) {
        self.vector = vector
        operations = vector.logs.reduce(0) { $0 + $1.sequence }
    }

    /// A commit made `written` durable in the journal, its write and sync taking `syncMicros`.
    mutating func committed(_ written: [LoggedOperation], syncMicros: UInt64) {
        // Once per run of one log (a commit is a few runs), not once per operation.
        for run in written.runsByLog {
            let last = written[run.range].lazy.map(\.sequence).max()!
            vector.recordAll(through: max(last, vector[run.log]), in: run.log)
        }
        operations += UInt64(written.count)
        commits += 1
        commitLatency.record(micros: syncMicros)
    }

    /// A snapshot from a peer, with the journal replayed after it, holds `held`: all of it is durable.
    mutating func installed(_ held: VersionVector) {
        for (log, sequence) in held.logs where sequence > vector[log] { vector.recordAll(through: sequence, in: log) }
        operations = vector.logs.reduce(0) { $0 + $1.sequence }
    }
}
