import Platform
import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Snapshots between nodes: a sender opens its newest snapshot file for a peer that lacks what
/// its journal trimmed, and a receiver installs the file a peer sent in place of its state.
extension RegistryEngine {
    /// Where a snapshot from a peer is written while it arrives, in the data directory.
    static let incomingSnapshotName = "incoming-snapshot.part"

    var incomingSnapshotPath: String { directory + "/" + Self.incomingSnapshotName }

    /// The newest snapshot file, open for reading, with its name and size; nil when there is none.
    /// It covers everything the journal trimmed (trimming waits for every kept snapshot).
    func openNewestSnapshot() throws(StorageError) -> (handle: FileHandle, name: String, bytes: Int)? {
        guard let label = try SnapshotFile.labels(in: directory, on: fs).first else { return nil }
        let name = SnapshotFile.name(label: label)
        let handle = try fs.open(directory + "/" + name, create: false)
        do {
            return (handle, name, try fs.size(handle))
        } catch {
            fs.close(handle)
            throw error
        }
    }

    /// Checks and installs the snapshot a peer sent, written whole and synced at
    /// ``incomingSnapshotPath``; returns what the node then holds durably. It blocks for as long
    /// as loading takes (seconds for millions of devices): call it off the event loops.
    ///
    /// The new state is the snapshot's, with every operation this node holds past it applied
    /// again: from the journal, and those still waiting for a commit. That needs the journal to
    /// hold, for each log, everything this node has past the snapshot; otherwise (a node that
    /// trimmed operations no peer's snapshot covers) it is refused and nothing changes. Before
    /// the new state answers anything, the file is this node's only snapshot (renamed into place
    /// and synced; it and the journal together rebuild the state at start-up) and the journal
    /// goes on in a new file. Requests keep being answered while the file loads; commits wait
    /// while the journal is read again.
    func installIncomingSnapshot() -> Result<VersionVector, WireError> {
        let path = incomingSnapshotPath
        let loaded: SnapshotStore.Loaded
        do {
            loaded = try SnapshotStore.load(
                path: path, label: 0, on: fs, expectedDevices: expectedDevices, tables: servingTables)
        } catch {
            try? fs.remove(path)
            return .failure(Self.snapshotRefused("the snapshot is damaged: \(error)"))
        }
        var woken = [CausalWaits<CausalWaiter>.Released]()
        let outcome = writer.queue.sync { () -> Result<VersionVector, WireError> in
            if snapshots.isRunning {
                return .failure(Self.snapshotRefused("this node is taking a snapshot of its own; send it again later", retryable: true))
            }
            let covered = loaded.metadata.versionVector
            let durable = core.withLockedValue { $0.durable }
            let own = peerIdentity.ownLog
            if covered[own] > durable[own] {
                return .failure(
                    Self.snapshotRefused("it holds \(own) through \(covered[own]), which this node has written only through \(durable[own])"))
            }
            for (log, sequence) in durable.logs where sequence > covered[log] {
                let trimmed = index.trimmedThrough(log)
                if trimmed > covered[log] {
                    return .failure(
                        Self.snapshotRefused(
                            "this node holds \(log) through \(sequence), but its journal no longer holds \(covered[log] + 1)...\(trimmed), and the snapshot does not cover them; send a newer snapshot"
                        ))
                }
            }
            var replayer = Replayer(registry: loaded.registry, vector: covered)
            let label: UInt64
            do {
                try replayer.replay(index.files, in: directory, on: fs)
                label = replayer.vector.logs.reduce(0) { $0 + $1.sequence }
                try writer.installed(replayer.vector.sequences)
                try fs.rename(path, to: directory + "/" + SnapshotFile.name(label: label))
                try fs.syncDirectory(directory)
                for old in try SnapshotFile.labels(in: directory, on: fs) where old != label {
                    try fs.remove(directory + "/" + SnapshotFile.name(label: old))
                }
                try fs.syncDirectory(directory)
            } catch {
                try? fs.remove(path)
                return .failure(Self.snapshotRefused("it could not be installed: \(error)", retryable: true))
            }
            for (log, sequence) in covered.logs where sequence > durable[log] { index.markTrimmed(log, through: sequence) }
            let held = replayer.vector
            let devices = core.withLockedValue { core -> Int in
                core.commits.dropPending(heldBy: replayer.vector)
                for operation in core.commits.pendingOperations { _ = replayer.apply(operation) }
                core.node.install(replayer.registry, holding: replayer.vector, clock: max(loaded.metadata.clock, replayer.newest))
                for (log, sequence) in held.logs where sequence > core.durable[log] { core.durable.recordAll(through: sequence, in: log) }
                core.durableOperations = label
                core.snapshotPolicy.covers(label, nowNanos: SystemClock.monotonicNanos())
                woken = Self.coveredCausalWaiters(&core)
                return core.node.registry.deviceCount
            }
            logger.info(
                "installed a snapshot from a peer",
                metadata: ["snapshot": "\(SnapshotFile.name(label: label))", "devices": "\(devices)", "holds": "\(held)"])
            return .success(held)
        }
        if case .success = outcome {
            wakeCausalWaiters(woken)
            notifyDurable()
        }
        return outcome
    }

    static func snapshotRefused(_ message: String, retryable: Bool = false) -> WireError {
        WireError(code: .snapshotRefused, message: message, retryable: retryable)
    }
}
