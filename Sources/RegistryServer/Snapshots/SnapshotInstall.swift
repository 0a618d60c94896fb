import Logging
import Platform
import RegistryCore
import RegistryStorage
import RegistryWire

/// Puts a snapshot a peer sent in place of the node's state: the snapshotter's files, the commit
/// pipeline's queue (nothing commits meanwhile) and the serving state, in that order.
///
/// The new state is the snapshot's, with every operation this node holds past it applied again:
/// from the journal, and those still waiting for a commit. That needs the journal to hold, for
/// each log, everything this node has past the snapshot; otherwise (a node that trimmed
/// operations no peer's snapshot covers) it is refused and nothing changes. Before the new state
/// answers anything, the file is this node's only snapshot (it and the journal together rebuild
/// the state at start-up) and the journal goes on in a new file. Requests keep being answered
/// while the file loads; commits wait while the journal is read again.
struct SnapshotInstall: Sendable {
    let core: SharedCore
    let pipeline: CommitPipeline
    let files: Snapshotter
    /// The journal, read again past the snapshot.
    let journal: (fs: any FileSystem, directory: String, index: JournalIndex)
    /// This node's own log: a snapshot may not hold more of it than this node wrote.
    let ownLog: LogID
    /// Where the serving state's tables come from.
    let tables: HugePageTableAllocator
    /// The wall clock, against which the snapshot's clock is checked as a peer's timestamps are.
    let wallClock: @Sendable () -> UInt64
    let logger: Logger

    /// Checks and installs the incoming snapshot, written whole and synced; returns what the node
    /// then holds durably, and the requests held for causal tokens that it lets through. It blocks
    /// for as long as loading takes (seconds for millions of devices): call it off the event loops.
    func install() -> (Result<VersionVector, WireError>, woken: [CausalWaits<RegistryEngine.CausalWaiter>.Released]) {
        let loaded: SnapshotStore.Loaded
        do {
            loaded = try files.loadIncoming(tables: tables)
        } catch {
            return (.failure(RegistryEngine.snapshotRefused("the snapshot is damaged: \(error)")), [])
        }
        return pipeline.betweenCommits {
            files.excludingSnapshots { install(loaded) }
                ?? (.failure(RegistryEngine.snapshotRefused("this node is taking a snapshot of its own; send it again later", retryable: true)), [])
        }
    }

    private func install(_ loaded: SnapshotStore.Loaded) -> (Result<VersionVector, WireError>, woken: [CausalWaits<RegistryEngine.CausalWaiter>.Released]) {
        let covered = loaded.metadata.versionVector
        let (durable, clock) = core.withLockedValue { ($0.durable.vector, $0.node.clock) }
        if let refusal = refusal(covering: covered, durable: durable) { return (.failure(refusal), []) }
        // The node's clock moves to the snapshot's: one too far ahead would have it refuse every
        // write until real time caught up, across restarts too (a snapshot keeps its clock).
        if case .tooFarAhead(_, let ahead, let limit) = clock.refusal(of: loaded.metadata.clock, wallMillis: wallClock()) {
            // Retryable: the sender keeps its snapshot and sends it again later, as it does a
            // batch refused for the same reason, rather than take a new one each time.
            return (
                .failure(
                    RegistryEngine.snapshotRefused(
                        "its clock is \(ahead) ms ahead of this node's wall clock, more than the \(limit) ms allowed", retryable: true)), []
            )
        }
        var replayer = Replayer(registry: loaded.registry, vector: covered)
        let label: UInt64
        do {
            try replayer.replay(journal.index.files, in: journal.directory, on: journal.fs)
            label = Snapshotter.label(covering: replayer.vector)
            try pipeline.writer.installedSnapshot()
            try files.placeIncoming(label: label)
        } catch {
            files.discardIncoming()
            return (.failure(RegistryEngine.snapshotRefused("it could not be installed: \(error)", retryable: true)), [])
        }
        for (log, sequence) in covered.logs where sequence > durable[log] { journal.index.markTrimmed(log, through: sequence) }
        let held = replayer.vector
        let (devices, woken, gap) = core.withLockedValue { core in
            core.commits.dropPending(heldBy: held)
            // The operations still to commit are applied again on the installed state, recording
            // their events (the watchers' feed starts again at `held`, and they come after it).
            if core.node.registry.recordsEvents { replayer.registry.recordEvents(configuredRules: core.node.configuredRules.rules) }
            replayer.staging = FeedStaging()
            // Each continues what the node held when it was admitted, and the installed state
            // holds at least that (refusal(covering:durable:) and the replay): none can follow a
            // gap. Should one, the invariant broke: every request is refused from now on, so that
            // none of them is written after a gap its journal must not have, and the node stops;
            // its restart rebuilds the state from the snapshot placed and the journal.
            var gap: Replayer.Outcome?
            for operation in core.commits.pendingOperations {
                let outcome = replayer.apply(operation)
                if case .gap = outcome, gap == nil { gap = outcome }
            }
            if let gap {
                core.commits.failed(
                    WireError(
                        code: .unavailable, message: "the node is stopping: after a snapshot's install, an operation to commit followed a gap (\(gap))",
                        retryable: true))
            }
            // The state holds those too, so the logs' positions are read after them: held alone, a
            // log's next batch would look like a gap. What is durable is `held`.
            core.node.install(replayer.registry, holding: replayer.vector, clock: max(loaded.metadata.clock, replayer.newest))
            core.node.feedStaging = replayer.staging
            core.durable.installed(held)
            core.snapshotPolicy.covers(label, nowNanos: SystemClock.monotonicNanos())
            return (core.node.registry.deviceCount, core.coveredCausalWaiters(), gap)
        }
        if let gap {
            logger.critical("an operation to commit followed a gap after a snapshot's install; the node stops", metadata: ["gap": "\(gap)"])
            pipeline.stopAfterFailure(.corrupt("after a snapshot's install, an operation to commit followed a gap: \(gap)"))
        }
        // The state jumped: watchers resume only from a cursor that holds what it now holds.
        pipeline.watchHub.restart(holding: held)
        logger.info(
            "installed a snapshot from a peer",
            metadata: ["snapshot": "\(SnapshotFile.name(label: label))", "devices": "\(devices)", "holds": "\(held)"])
        return (.success(held), woken)
    }

    /// Why a snapshot covering `covered` cannot replace a state that holds `durable`, if it cannot.
    private func refusal(covering covered: VersionVector, durable: VersionVector) -> WireError? {
        if covered[ownLog] > durable[ownLog] {
            return RegistryEngine.snapshotRefused(
                "it holds \(ownLog) through \(covered[ownLog]), which this node has written only through \(durable[ownLog])")
        }
        for (log, sequence) in durable.logs where sequence > covered[log] {
            let trimmed = journal.index.trimmedThrough(log)
            if trimmed > covered[log] {
                return RegistryEngine.snapshotRefused(
                    "this node holds \(log) through \(sequence), but its journal no longer holds \(covered[log] + 1)...\(trimmed), and the snapshot does not cover them; send a newer snapshot"
                )
            }
        }
        return nil
    }
}

extension RegistryEngine {
    /// SNAPSHOT_REFUSED, with why.
    static func snapshotRefused(_ message: String, retryable: Bool = false) -> WireError {
        WireError(code: .snapshotRefused, message: message, retryable: retryable)
    }
}
