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

    /// One hand-over from the reading thread to the restoring one. A snapshot's devices and
    /// claims, nearly all of it, come as their fields, not as ``SnapshotRecord``s (an enum with
    /// boxed cases, dear to copy in bulk; docs/performance.md, "Claims in the claim index's
    /// order", has what the copies cost).
    enum Chunk: Sendable {
        case metadata(SnapshotMetadata)
        case records([SnapshotRecord])
        case devices([RegistryState.Restorer.Device])
        case claims([RegistryState.Restorer.Claim])
        /// The reader's last item: nil when the file was whole, else what was wrong.
        case finished(StorageError?)
    }

    /// Records decoded on the reading thread, gathered for hand-over in the order they came:
    /// only one kind of chunk is ever being gathered. One branch a kind, not one generic append
    /// through a key path: appending through a `WritableKeyPath` copies the whole array.
    private struct Gathering {
        let handoff: BoundedHandoff<Chunk>
        var records = [SnapshotRecord]()
        var devices = [RegistryState.Restorer.Device]()
        var claims = [RegistryState.Restorer.Claim]()

        init(handoff: BoundedHandoff<Chunk>) {
            self.handoff = handoff
            records.reserveCapacity(chunkRecords)
        }

        mutating func add(_ record: SnapshotRecord) {
            switch record {
            case .device(let id, let created, let origin, let vendor):
                if !records.isEmpty || !claims.isEmpty { handOver() }
                if devices.isEmpty { devices.reserveCapacity(chunkRecords) }
                devices.append(RegistryState.Restorer.Device(id: id, created: created, origin: origin, vendor: vendor))
                if devices.count == chunkRecords { handOver() }
            case .claim(let vendor, let identifier, let owner):
                if !records.isEmpty || !devices.isEmpty { handOver() }
                if claims.isEmpty { claims.reserveCapacity(chunkRecords) }
                claims.append(RegistryState.Restorer.Claim(vendor: vendor, identifier: identifier, owner: owner))
                if claims.count == chunkRecords { handOver() }
            default:
                if !devices.isEmpty || !claims.isEmpty { handOver() }
                records.append(record)
                if records.count == chunkRecords { handOver() }
            }
        }

        /// Hands over what is gathered, if anything.
        mutating func handOver() {
            if !records.isEmpty {
                handoff.put(.records(records))
                records.removeAll(keepingCapacity: true)
            }
            if !devices.isEmpty {
                handoff.put(.devices(devices))
                devices = []
            }
            if !claims.isEmpty {
                handoff.put(.claims(claims))
                claims = []
            }
        }
    }

    /// Loads snapshot `label`; throws what is wrong with it. One thread reads, checks and decodes
    /// the file while the caller's restores what it decoded (reading and decoding were a fifth of
    /// a single-threaded load).
    /// `inBackground`: the caller runs at `SCHED_IDLE` (the snapshotter), and the reading thread
    /// does too; at normal priority it took CPU from the requests while a snapshot ran.
    /// `claimSeed` seeds the restored claim index (``RegistryState/init(expectedDevices:claimSeed:tables:)``).
    static func load(
        label: UInt64, in directory: String, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64?,
        tables: any TableAllocator = HeapTableAllocator(), inBackground: Bool = false
    ) throws(StorageError) -> Loaded {
        try load(
            path: directory + "/" + SnapshotFile.name(label: label), label: label, on: fs, expectedDevices: expectedDevices, claimSeed: claimSeed,
            tables: tables, inBackground: inBackground)
    }

    /// The most devices a snapshot file of `bytes` can hold: each device record holds at least its
    /// 16-byte ID. Bounds the sizing a header's count asks for.
    static func mostDevices(inFileOf bytes: Int) -> Int {
        min(max(0, bytes) / 16, RegistryState.maxExpectedDevices)
    }

    /// Loads the snapshot file at `path` (one a peer sent, say), as ``load(label:in:on:expectedDevices:claimSeed:tables:inBackground:)``.
    static func load(
        path: String, label: UInt64, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64?,
        tables: any TableAllocator = HeapTableAllocator(), inBackground: Bool = false
    ) throws(StorageError) -> Loaded {
        let fileBytes: Int
        do {
            let file = try fs.open(path, create: false)
            defer { fs.close(file) }
            fileBytes = try fs.size(file)
        }
        let handoff = BoundedHandoff<Chunk>(capacity: 4)
        // A thread of its own, not a dispatch queue's: a queue's worker would keep the priority.
        let reader: @Sendable () -> Void = {
            if inBackground { Scheduling.runThisThreadWhenIdle() }
            var gathering = Gathering(handoff: handoff)
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
                            gathering.add(try SnapshotCodec.decodeRecord(raw))
                        } catch {
                            throw .corrupt("snapshot \(path): \(error)")
                        }
                    })
                gathering.handOver()
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
            let chunk = handoff.take()
            switch chunk {
            case .metadata(let decoded):
                metadata = decoded
                // The header's count sizes the tables, but no further than the file's bytes could
                // hold devices: a header that claimed 2^30 devices over no records had the node
                // map tens of gigabytes of index.
                let held = Int(min(decoded.devices, UInt64(Self.mostDevices(inFileOf: fileBytes))))
                restorer = RegistryState.Restorer(expectedDevices: max(expectedDevices, held), claimSeed: claimSeed, tables: tables)
            case .records, .devices, .claims:
                // After a failure the rest is drained, so that the reader can finish.
                guard failure == nil, restorer != nil else { continue }
                do {
                    switch chunk {
                    case .records(let records): for record in records { try restorer!.add(record) }
                    case .devices(let devices): for device in devices { try restorer!.addDevice(device) }
                    case .claims(let claims): for claim in claims { try restorer!.addClaim(claim) }
                    case .metadata, .finished: break
                    }
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
    ///
    /// A snapshot found corrupt is set aside (renamed `….snap.unusable`, kept for a look until
    /// the next snapshot is taken, ``removeOld(keeping:in:on:)``): left in place, it stays the
    /// newest, a later snapshot of the same operations counts as taken already, the trim keeps
    /// only it, and peers are sent it. One that could not be read (an I/O error), or that another
    /// version wrote (a format this one does not read), stays: it may load next time.
    static func loadNewest(
        in directory: String, on fs: any FileSystem, expectedDevices: Int, claimSeed: UInt64?,
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
                let path = directory + "/" + SnapshotFile.name(label: label)
                guard case .corrupt = error, !SnapshotFile.isAnotherVersions(path, on: fs) else {
                    logger.warning("a snapshot could not be read; trying an older one", metadata: ["reason": "\(error)"])
                    continue
                }
                do throws(StorageError) {
                    try fs.rename(path, to: path + unusableSuffix)
                    try fs.syncDirectory(directory)
                    logger.warning(
                        "a snapshot is corrupt; set it aside and trying an older one",
                        metadata: ["reason": "\(error)", "set_aside": "\(path + unusableSuffix)"])
                } catch {
                    logger.warning("a snapshot is corrupt, and could not be set aside; trying an older one", metadata: ["reason": "\(error)"])
                }
            }
        }
        return (nil, problems)
    }

    /// Whether `name` is the temporary file of a snapshot being written (or left unfinished).
    static func isUnfinished(_ name: String) -> Bool {
        name.hasPrefix("snapshot-") && name.hasSuffix(".snap.tmp")
    }

    /// What a corrupt snapshot's name gets when it is set aside (``loadNewest(in:on:expectedDevices:claimSeed:tables:inBackground:logger:)``).
    static let unusableSuffix = ".unusable"

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

    /// Deletes all but the newest `keeping` snapshots, any temporary file of an unfinished one,
    /// and any set aside as corrupt: a snapshot now stands in for it, and it may hold what an
    /// erasure must take off the disk.
    static func removeOld(keeping: Int, in directory: String, on fs: any FileSystem) throws(StorageError) {
        for label in try SnapshotFile.labels(in: directory, on: fs).dropFirst(keeping) {
            try fs.remove(directory + "/" + SnapshotFile.name(label: label))
        }
        for name in try fs.list(directory) where isUnfinished(name) || (name.hasPrefix("snapshot-") && name.hasSuffix(".snap" + unusableSuffix)) {
            try fs.remove(directory + "/" + name)
        }
        try fs.syncDirectory(directory)
    }
}
