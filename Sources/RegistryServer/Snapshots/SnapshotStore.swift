import Platform
import CLinuxFile
import Dispatch
import Foundation
import Logging
import RegistryCore
import RegistryStorage
import RegistryWire

/// Snapshots of a node's state in its data directory: written from a state, and loaded back
/// (the newest that is whole, falling back to older ones with a warning).
enum SnapshotStore {
    /// A snapshot loaded into memory.
    struct Loaded {
        let label: UInt64
        let metadata: SnapshotMetadata
        let registry: RegistryState
    }

    /// Records decoded per hand-over from the reading thread.
    static let chunkRecords = 8_192

    /// One hand-over from the reading thread to the restoring one.
    enum Chunk: Sendable {
        case metadata(SnapshotMetadata)
        case records([SnapshotRecord])
        /// The reader's last item: nil when the file was whole, else what was wrong.
        case finished(StorageError?)
    }

    /// Loads snapshot `label`; throws what is wrong with it. One thread reads, checks and decodes
    /// the file while the caller's restores what it decoded (reading and decoding were a fifth of
    /// a single-threaded load).
    /// `inBackground`: the caller runs at `SCHED_IDLE` (the snapshotter), and the reading thread
    /// does too; at normal priority it took CPU from the requests while a snapshot ran.
    /// `claimSeed` seeds the restored claim index (``RegistryState/init(expectedDevices:claimSeed:tables:)``).
    static func load(
        label: UInt64, in directory: String, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64? = nil,
        tables: any TableAllocator = HeapTableAllocator(), inBackground: Bool = false
    ) throws(StorageError) -> Loaded {
        try load(
            path: directory + "/" + SnapshotFile.name(label: label), label: label, on: fs, expectedDevices: expectedDevices, claimSeed: claimSeed,
            tables: tables, inBackground: inBackground)
    }

    /// Loads the snapshot file at `path` (one a peer sent, say), as ``load(label:in:on:expectedDevices:claimSeed:tables:inBackground:)``.
    static func load(
        path: String, label: UInt64, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64? = nil,
        tables: any TableAllocator = HeapTableAllocator(), inBackground: Bool = false
    ) throws(StorageError) -> Loaded {
        let handoff = BoundedHandoff<Chunk>(capacity: 4)
        // A thread of its own, not a dispatch queue's: a queue's worker would keep the priority.
        let reader: @Sendable () -> Void = {
            if inBackground { Scheduling.runThisThreadWhenIdle() }
            var chunk = [SnapshotRecord]()
            chunk.reserveCapacity(chunkRecords)
            do throws(StorageError) {
                try SnapshotFile.read(
                    path, on: fs,
                    metadata: { (bytes) throws(StorageError) in
                        do {
                            handoff.put(.metadata(try SnapshotCodec.decodeMetadata(bytes)))
                        } catch {
                            throw .corrupt("snapshot \(path): \(error)")
                        }
                    },
                    record: { (raw) throws(StorageError) in
                        do {
                            chunk.append(try SnapshotCodec.decodeRecord(raw))
                        } catch {
                            throw .corrupt("snapshot \(path): \(error)")
                        }
                        if chunk.count == chunkRecords {
                            handoff.put(.records(chunk))
                            chunk.removeAll(keepingCapacity: true)
                        }
                    })
                if !chunk.isEmpty { handoff.put(.records(chunk)) }
                handoff.put(.finished(nil))
            } catch {
                handoff.put(.finished(error))
            }
        }
        guard DetachedThread.start(named: "snapshot-read", reader) else {
            throw .io(path: path, reason: "no thread could be started to read the snapshot")
        }
        var metadata: SnapshotMetadata?
        var restorer: RegistryState.Restorer?
        var failure: StorageError?
        loop: while true {
            switch handoff.take() {
            case .metadata(let decoded):
                metadata = decoded
                restorer = RegistryState.Restorer(
                    expectedDevices: max(expectedDevices, Int(min(decoded.devices, 1 << 30))), claimSeed: claimSeed, tables: tables)
            case .records(let records):
                // After a failure the rest is drained, so that the reader can finish.
                guard failure == nil, restorer != nil else { continue }
                do {
                    for record in records { try restorer!.add(record) }
                } catch {
                    failure = .corrupt("snapshot \(path): \(error)")
                }
            case .finished(let error):
                failure = failure ?? error
                break loop
            }
        }
        if let failure { throw failure }
        guard let metadata, var restorer else { throw .corrupt("snapshot \(path) has no metadata") }
        do {
            return Loaded(label: label, metadata: metadata, registry: try restorer.finish())
        } catch {
            throw .corrupt("snapshot \(path): \(error)")
        }
    }

    /// The newest snapshot that loads, trying older ones when it does not (each failure logged as
    /// a warning); nil when there is none. `problems` says what was wrong with those skipped.
    static func loadNewest(
        in directory: String, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64? = nil,
        tables: any TableAllocator = HeapTableAllocator(), inBackground: Bool = false, logger: Logger
    ) throws(StorageError) -> (loaded: Loaded?, problems: [String]) {
        var problems = [String]()
        for label in try SnapshotFile.labels(in: directory, on: fs) {
            do {
                return (
                    try load(
                        label: label, in: directory, on: fs, expectedDevices: expectedDevices, claimSeed: claimSeed, tables: tables,
                        inBackground: inBackground),
                    problems
                )
            } catch {
                problems.append(error.description)
                logger.warning("a snapshot is unusable; trying an older one", metadata: ["reason": "\(error)"])
            }
        }
        return (nil, problems)
    }

    /// Appends every record of `registry` to `writer`.
    static func append(_ registry: RegistryState, to writer: SnapshotWriter) throws(StorageError) {
        var failure: StorageError?
        registry.forEachSnapshotRecord { record in
            guard failure == nil else { return }
            do throws(StorageError) {
                try writer.append(recordBytes: SnapshotCodec.encodedSize(of: record)) { SnapshotCodec.write(record, to: $0) }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Deletes all but the newest `keeping` snapshots, and any temporary file of an unfinished one.
    static func removeOld(keeping: Int, in directory: String, on fs: any FileSystem) throws(StorageError) {
        for label in try SnapshotFile.labels(in: directory, on: fs).dropFirst(keeping) {
            try fs.remove(directory + "/" + SnapshotFile.name(label: label))
        }
        for name in try fs.list(directory) where name.hasPrefix("snapshot-") && name.hasSuffix(".snap.tmp") {
            try fs.remove(directory + "/" + name)
        }
        try fs.syncDirectory(directory)
    }
}
