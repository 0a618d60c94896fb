import Platform
import CLinuxFile
import Dispatch
import Foundation
import Logging
import RegistryCore
import RegistryStorage
import RegistryWire
import Synchronization

/// The one owner of the node's snapshot files. It takes snapshots (below), opens the newest for a
/// peer that lacks what the journal trimmed, and receives a peer's snapshot and puts it in place
/// (in PeerSnapshots.swift).
///
/// It takes the node's snapshots in the background from the serving state itself: the node forks
/// under the engine's lock, the copy streams the state's records (``ForkedSnapshot``), and this
/// writes them, and puts the file under its name once the journal holds everything it covers. The
/// serving node never waits for it beyond the fork: its cost to requests is the CPU and disk it
/// shares, and the pages the node writes meanwhile, which the kernel copies. Where the node
/// cannot fork (or `--snapshot-by journal`), and for a snapshot in the foreground
/// (``takeNow(through:clock:currentFile:devices:durable:)``) unless everything the serving state
/// holds is durable, it loads the newest snapshot into a state of its own, applies the journal
/// after it up to a target, and writes that. Afterwards it keeps the newest ``keeping`` snapshots and deletes the
/// journal files that every kept snapshot covers, and that every retention floor has passed.
///
/// `@unchecked Sendable`: the file system, directory, index and identity are immutable or
/// themselves thread-safe; every snapshot runs on `queue` (serial), and the shared bookkeeping is
/// a `Mutex`.
final class Snapshotter: @unchecked Sendable {
    /// Snapshots kept: a damaged newest one falls back to the one before.
    static let keeping = 2

    /// What one snapshot took.
    struct Taken: Sendable, Equatable {
        let label: UInt64
        let bytes: Int
        let operations: UInt64
        let millis: UInt64
        /// Journal files deleted afterwards.
        let filesRemoved: Int
        /// How long the node was held for the fork, under the engine's lock (0: not forked).
        var forkMicros: UInt64 = 0
        /// How long after a fork the child had read the indexes, and the node held its new claims
        /// aside (``ForkedSnapshot/copy(into:silenceMillis:)``; 0: not forked).
        var indexesReadMillis: UInt64 = 0
    }

    let fs: any FileSystem
    let directory: String
    /// The room a snapshot from a peer must leave on the data directory's file system: the
    /// journal grows into it, and a full disk stops the journal for good.
    let spareBytes: UInt64
    private let index: JournalIndex
    private let nodeID: NodeID
    private let epoch: UInt64
    let expectedDevices: Int
    /// The seed of the claim index of every state it loads or builds (``RegistryState/init(expectedDevices:claimSeed:tables:)``).
    let claimSeed: UInt64?
    /// Whether background snapshots are taken by forking (`--snapshot-by`).
    let forks: Bool
    /// Where the snapshot's own state gets its index tables: huge pages, as the serving state's,
    /// since on small pages faulting gigabytes in contended with the requests; but freed at once
    /// (see ``HugePageTableAllocator``).
    private let tables: any TableAllocator
    private let logger: Logger
    /// One snapshot at a time; each runs on a thread of its own (see ``run(_:)``).
    private let queue = DispatchQueue(label: "registry.snapshot")

    private struct Bookkeeping {
        var running = false
        var last: Taken?
        /// When the last snapshot finished (uptime nanoseconds), or start-up.
        var lastAt = SystemClock.monotonicNanos()
        /// Per log, the highest sequence every member is known to hold; journal files beyond it
        /// stay. Nil: no floor (a single node).
        var retentionFloor: [LogID: UInt64]?
        /// The last trim kept a file only because the retention floor had not passed it: the
        /// floor's next move trims again (``setRetentionFloor(_:)``), rather than the next snapshot,
        /// which may be long in coming (a forgotten device's bytes must go on time).
        var heldByFloor = false
        /// A peer's snapshot is being installed (``excludingSnapshots(_:)``): no trim meanwhile.
        var installing = false
        /// A trim the floor's move asked for is running (``trimHeldFiles()``): no install meanwhile.
        var trimming = false

        /// Whether to trim again for ``heldByFloor``, when `condition` holds; clears it when so
        /// (the trim sets it again if the floor still holds a file back).
        mutating func takeHeldTrim(when condition: Bool = true) -> Bool {
            guard condition, heldByFloor else { return false }
            heldByFloor = false
            return true
        }
    }

    private let bookkeeping = Mutex(Bookkeeping())
    /// Set while a peer's snapshot is being received or installed: one at a time.
    let intakeBusy = Atomic<Bool>(false)

    init(
        fs: any FileSystem, directory: String, index: JournalIndex, nodeID: NodeID, epoch: UInt64, expectedDevices: Int, claimSeed: UInt64?,
        forks: Bool = true, tables: any TableAllocator = HeapTableAllocator(), spareBytes: UInt64 = 2 * UInt64(CommitJournal.rotationBytes),
        logger: Logger
    ) {
        self.fs = fs
        self.directory = directory
        self.spareBytes = spareBytes
        self.index = index
        self.nodeID = nodeID
        self.epoch = epoch
        self.expectedDevices = expectedDevices
        self.claimSeed = claimSeed
        self.forks = forks
        self.tables = tables
        self.logger = logger
    }

    /// The last snapshot this run took, and how long ago it finished (or start-up was).
    var last: (taken: Taken?, ageNanos: UInt64) {
        bookkeeping.withLock { ($0.last, SystemClock.monotonicNanos() - $0.lastAt) }
    }

    var isRunning: Bool { bookkeeping.withLock { $0.running } }

    /// Runs `body` with no snapshot and no trim running meanwhile (a peer's snapshot's install,
    /// which changes what the snapshots cover); nil, and `body` not run, when one is running.
    /// Call it on the writer's queue, where no snapshot starts meanwhile; a trim the floor asked
    /// for waits until it is done.
    func excludingSnapshots<Result>(_ body: () -> Result) -> Result? {
        let claimed = bookkeeping.withLock { state -> Bool in
            guard !state.running, !state.trimming else { return false }
            state.installing = true
            return true
        }
        guard claimed else { return nil }
        defer {
            if bookkeeping.withLock({ state -> Bool in
                state.installing = false
                return state.takeHeldTrim()
            }) {
                trimHeldFilesLater()
            }
        }
        return body()
    }

    /// Sets the retention floor: journal files holding operations past it are kept even when a
    /// snapshot covers them (the cluster sets it to what every member has acknowledged).
    func setRetentionFloor(_ floor: [LogID: UInt64]?) {
        let trimAgain = bookkeeping.withLock { bookkeeping -> Bool in
            let moved = bookkeeping.retentionFloor != floor
            bookkeeping.retentionFloor = floor
            return bookkeeping.takeHeldTrim(when: moved)
        }
        if trimAgain { trimHeldFilesLater() }
    }

    /// Queues ``trimHeldFiles()`` on the snapshots' queue: after a snapshot that is running,
    /// never beside it.
    private func trimHeldFilesLater() {
        queue.async { self.trimHeldFiles() }
    }

    /// Trims the journal files the retention floor held back and no longer does; not beside an
    /// install (``excludingSnapshots(_:)``), which changes what the snapshots cover: the next
    /// move of the floor tries again.
    private func trimHeldFiles() {
        // On the snapshots' queue, so never beside a snapshot; an install asks again when done.
        let claimed = bookkeeping.withLock { state -> Bool in
            guard !state.installing else {
                state.heldByFloor = true
                return false
            }
            state.trimming = true
            return true
        }
        guard claimed else { return }
        defer { bookkeeping.withLock { $0.trimming = false } }
        do {
            // Sealed files only: the one being written is never sealed.
            let removed = try trim(currentFile: .max)
            if removed > 0 { logger.info("trimmed journal files once every member held them", metadata: ["files": "\(removed)"]) }
        } catch {
            logger.warning("could not trim the journal", metadata: ["error": "\(error)"])
        }
    }

    /// Takes a snapshot through `target` in the background unless one is running; `completion`
    /// (on the snapshot queue) gets the outcome, or nil when one was already running.
    /// It keeps the newest `keeping` snapshots (1 for an erasure snapshot, ``ErasureSchedule``).
    /// `devices`: the devices and aliases the node holds now, which a snapshot through what it
    /// holds cannot exceed; the state the snapshot is built in is sized for them at once.
    ///
    /// `fork` forks the node holding the engine's lock (``ForkedSnapshot/start(_:metadata:)``);
    /// when it fails, or the node does not snapshot by fork (``forks``), the snapshot is built
    /// from the journal instead, through `target`. A forked
    /// snapshot may hold operations not yet durable: it is put under its name once `isDurable` says
    /// the journal holds its version vector.
    func start(
        through target: [LogID: UInt64], clock: HLCTimestamp, currentFile: UInt64, devices: Int, keeping: Int = Snapshotter.keeping,
        fork: (() -> Result<ForkedSnapshot, ForkedWriter.Failure>)? = nil, isDurable: @escaping @Sendable (VersionVector) -> Bool = { _ in true },
        completion: @escaping @Sendable (Result<Taken, StorageError>?) -> Void
    ) {
        let begin = bookkeeping.withLock { state -> Bool in
            guard !state.running else { return false }
            state.running = true
            return true
        }
        guard begin else { return completion(nil) }
        let forked: ForkedSnapshot?
        let forkStarted = SystemClock.monotonicNanos()
        let outcome = forks ? fork?() : nil
        let forkMicros = (SystemClock.monotonicNanos() - forkStarted) / 1_000
        switch outcome {
        case .success(let snapshot): forked = snapshot
        case .failure(let failure):
            logger.warning("could not fork for a snapshot; building it from the journal instead", metadata: ["error": "\(failure)"])
            forked = nil
        case nil: forked = nil
        }
        queue.async {
            let outcome = self.run { () throws(StorageError) in
                if let forked {
                    var taken = try self.write(forked, currentFile: currentFile, keeping: keeping, isDurable: isDurable)
                    taken.forkMicros = forkMicros
                    return taken
                }
                return try self.take(through: target, clock: clock, currentFile: currentFile, devices: devices, keeping: keeping, inBackground: true)
            }
            self.finished(outcome)
            completion(outcome)
        }
    }

    /// Longest wait for the journal to hold what a forked snapshot covers: its commits are
    /// milliseconds apart, and a journal that fails stops the node.
    static let durableWaitNanos: UInt64 = 60_000_000_000

    /// Writes a forked snapshot (on the snapshot's thread): the child's records into the file, which
    /// goes under its name once the journal holds what it covers; then old snapshots and journal
    /// files go, as after any snapshot.
    private func write(
        _ forked: ForkedSnapshot, currentFile: UInt64, keeping: Int, isDurable: @Sendable (VersionVector) -> Bool
    ) throws(StorageError) -> Taken {
        let started = SystemClock.monotonicNanos()
        var indexesReadMillis: UInt64 = 0
        let newest: UInt64?
        do throws(StorageError) {
            newest = try SnapshotFile.labels(in: directory, on: fs).first
        } catch {
            forked.abandon()
            throw error
        }
        var taken = try put(
            metadata: forked.metadata, newest: newest, started: started,
            currentFile: currentFile, keeping: keeping, unneeded: forked.abandon
        ) {
            (writer) throws(StorageError) in
            indexesReadMillis = try forked.copy(into: writer)
            while !isDurable(forked.metadata.versionVector) {
                guard SystemClock.monotonicNanos() - started < Self.durableWaitNanos else {
                    throw .io(path: directory, reason: "the journal did not make what the snapshot holds durable in time")
                }
                usleep(1_000)
            }
        }
        taken.indexesReadMillis = indexesReadMillis
        return taken
    }

    /// Writes the snapshot `metadata` describes, its records from `fill`, unless `newest` (the label
    /// of the newest snapshot there is) is its label and covers what it would (then `unneeded` is
    /// called instead); then keeps the newest `keeping` snapshots and trims the journal. The
    /// snapshot's time counts from `started`.
    private func put(
        metadata: SnapshotMetadata, newest: UInt64?, started: UInt64, currentFile: UInt64, keeping: Int,
        unneeded: () -> Void = {}, fill: (SnapshotWriter) throws(StorageError) -> Void
    ) throws(StorageError) -> Taken {
        let label = Self.label(covering: metadata.versionVector)
        let bytes: Int
        if newest == label, covers(label: label, metadata.versionVector) {
            unneeded()
            bytes = 0  // nothing new since the last snapshot
        } else {
            let writer: SnapshotWriter
            do {
                writer = try SnapshotWriter(fs: fs, directory: directory, label: label, metadata: SnapshotCodec.encode(metadata))
            } catch {
                unneeded()
                throw error
            }
            try fill(writer)
            try writer.finish()
            bytes = writer.bytesWritten
        }
        try SnapshotStore.removeOld(keeping: keeping, in: directory, on: fs)
        let removed = try trim(currentFile: currentFile)
        return Taken(
            label: label, bytes: bytes, operations: label, millis: (SystemClock.monotonicNanos() - started) / 1_000_000,
            filesRemoved: removed)
    }

    /// Makes a forked snapshot of `registry`, which holds `vector` and whose clock is at `clock`;
    /// call it holding the engine's lock (see ``start(through:clock:currentFile:devices:keeping:fork:isDurable:completion:)``).
    func fork(_ registry: inout RegistryState, vector: VersionVector, clock: HLCTimestamp) -> Result<ForkedSnapshot, ForkedWriter.Failure> {
        ForkedSnapshot.start(&registry, metadata: metadata(of: registry, through: vector, clock: clock))
    }

    /// The header of this node's snapshot of `registry`, which holds `vector`, its clock at `clock`.
    private func metadata(of registry: RegistryState, through vector: VersionVector, clock: HLCTimestamp) -> SnapshotMetadata {
        SnapshotMetadata(nodeID: nodeID, epoch: epoch, clock: clock, versionVector: vector, devices: UInt64(registry.slotCount))
    }

    /// A snapshot's label, which names its file: the operations `vector` covers.
    static func label(covering vector: VersionVector) -> UInt64 {
        // Sequences read in are at most 2^62 (``VersionVector/largestSequence``); a sum of many
        // such saturates rather than trap.
        vector.logs.reduce(0) { sum, entry in
            let (added, overflow) = sum.addingReportingOverflow(entry.sequence)
            return overflow ? .max : added
        }
    }

    /// Runs `body` on a thread of its own at `SCHED_IDLE`, and waits for it: the snapshot takes only
    /// CPU time the requests leave (a node kept fully busy puts its snapshots off). Together with
    /// writing the file past the page cache (``ChunkedFileWriter``) this is what keeps a
    /// snapshot from the requests' tail; BENCHMARKS.md ("Storage") has the figures.
    private func run(_ body: @escaping @Sendable () throws(StorageError) -> Taken) -> Result<Taken, StorageError> {
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<Taken, StorageError>?>(nil)
        let work: @Sendable () -> Void = {
            let result = Result { () throws(StorageError) in try body() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        let started = DetachedThread.start(named: "snapshot") {
            Scheduling.runThisThreadWhenIdle()
            work()
        }
        // No thread to be had: the caller's own, at its priority (a queue's thread must not be
        // left idle-scheduled), rather than no snapshot.
        if !started { work() }
        done.wait()
        return outcome.withLock { $0! }
    }

    /// Takes a snapshot through `target` now, on the caller's thread, after any running one
    /// (`devices` as in ``start(through:clock:currentFile:devices:keeping:fork:isDurable:completion:)``).
    /// `durable`: the serving state, when every operation it holds is durable (its version vector
    /// is `target`): it is written as it is, as a forked snapshot is; otherwise the snapshot is
    /// built from the journal.
    func takeNow(
        through target: [LogID: UInt64], clock: HLCTimestamp, currentFile: UInt64, devices: Int, durable: RegistryState? = nil
    ) -> Result<Taken, StorageError> {
        queue.sync {
            // On the caller's thread and priority: a stopping node has nothing else to do.
            let outcome = Result { () throws(StorageError) in
                guard let durable else {
                    return try self.take(
                        through: target, clock: clock, currentFile: currentFile, devices: devices, keeping: Self.keeping, inBackground: false)
                }
                var vector = VersionVector()
                for (log, sequence) in target { vector.recordAll(through: sequence, in: log) }
                return try self.put(
                    metadata: metadata(of: durable, through: vector, clock: clock), newest: try SnapshotFile.labels(in: self.directory, on: self.fs).first,
                    started: SystemClock.monotonicNanos(), currentFile: currentFile, keeping: Self.keeping
                ) {
                    (writer) throws(StorageError) in
                    try SnapshotStore.append(durable, to: writer)
                }
            }
            finished(outcome)
            return outcome
        }
    }

    private func finished(_ outcome: Result<Taken, StorageError>) {
        bookkeeping.withLock { state in
            state.running = false
            if case .success(let taken) = outcome {
                state.last = taken
                state.lastAt = SystemClock.monotonicNanos()
            }
        }
        switch outcome {
        case .success(let taken):
            logger.info(
                "took a snapshot",
                metadata: [
                    "snapshot": "\(SnapshotFile.name(label: taken.label))", "bytes": "\(taken.bytes)", "millis": "\(taken.millis)",
                    "journal_files_removed": "\(taken.filesRemoved)", "fork_micros": "\(taken.forkMicros)",
                    "indexes_read_millis": "\(taken.indexesReadMillis)",
                ])
        case .failure(let error):
            logger.error("a snapshot failed; the journal keeps everything, and the next one tries again", metadata: ["error": "\(error)"])
        }
    }

    /// `inBackground`: on the `SCHED_IDLE` thread of ``run(_:)``, whose priority the thread that
    /// reads the snapshot then takes too; the journal is read on this thread.
    private func take(
        through target: [LogID: UInt64], clock: HLCTimestamp, currentFile: UInt64, devices: Int, keeping: Int, inBackground: Bool
    ) throws(StorageError) -> Taken {
        let started = SystemClock.monotonicNanos()
        // Sized once for every device the replay may add: an index that grows instead zeroes
        // and fills each smaller table on the way, and moves every entry at each doubling.
        let sizing = max(expectedDevices, devices)
        let base = try SnapshotStore.loadNewest(
            in: directory, on: fs, expectedDevices: sizing, claimSeed: claimSeed, tables: tables, inBackground: inBackground, logger: logger
        ).loaded
        var replayer = Replayer(
            registry: base?.registry ?? RegistryState(expectedDevices: sizing, claimSeed: claimSeed, tables: tables), vector: base?.metadata.versionVector ?? VersionVector(),
            limits: target)
        try replayer.replay(index.files, in: directory, on: fs, inBackground: inBackground)
        let newest = max(clock, base?.metadata.clock ?? .zero, replayer.newest)
        let registry = replayer.registry
        // The newest snapshot that loaded: a damaged newer one is written over.
        return try put(
            metadata: metadata(of: registry, through: replayer.vector, clock: newest), newest: base?.label, started: started,
            currentFile: currentFile, keeping: keeping
        ) {
            (writer) throws(StorageError) in
            try SnapshotStore.append(registry, to: writer)
        }
    }

    /// Whether the snapshot file of `label` covers exactly `vector`, by its header. A label names
    /// how many operations a snapshot covers, and one placed from a peer is named after what its
    /// install replayed beside it: the label alone does not say that nothing is new.
    private func covers(label: UInt64, _ vector: VersionVector) -> Bool {
        guard let bytes = try? SnapshotFile.readMetadata(directory + "/" + SnapshotFile.name(label: label), on: fs),
            let held = try? SnapshotCodec.decodeMetadata(bytes)
        else { return false }
        return held.versionVector == vector
    }

    /// Deletes the oldest journal files, up to the first that some kept snapshot or the retention
    /// floor still needs, or that is being written; returns how many.
    private func trim(currentFile: UInt64) throws(StorageError) -> Int {
        // What every kept snapshot covers: the oldest of them, read from its header.
        var covered: [LogID: UInt64]?
        for label in try SnapshotFile.labels(in: directory, on: fs) {
            let bytes = try SnapshotFile.readMetadata(directory + "/" + SnapshotFile.name(label: label), on: fs)
            guard let metadata = try? SnapshotCodec.decodeMetadata(bytes) else { return 0 }
            let vector = metadata.versionVector.sequences
            if let current = covered {
                covered = Dictionary(uniqueKeysWithValues: current.compactMap { log, sequence in vector[log].map { (log, min(sequence, $0)) } })
            } else {
                covered = vector
            }
        }
        guard let covered else { return 0 }
        let floor = bookkeeping.withLock { $0.retentionFloor }
        var firstKept: UInt64?
        // The first file kept was kept only for the floor: trimmed again once it moves.
        var heldByFloor = false
        for file in index.files {
            let snapshotted = file.sealed && file.number < currentFile && file.ranges.allSatisfy { log, range in range.upperBound <= covered[log] ?? 0 }
            let passed = file.ranges.allSatisfy { log, range in range.upperBound <= floor.map { $0[log] ?? 0 } ?? .max }
            if !(snapshotted && passed) {
                firstKept = file.number
                heldByFloor = snapshotted
                break
            }
        }
        // A floor that moved since it was read here finds no trim to ask again: ask now.
        let trimAgain = bookkeeping.withLock { state -> Bool in
            state.heldByFloor = heldByFloor
            return state.takeHeldTrim(when: state.retentionFloor != floor)
        }
        if trimAgain { trimHeldFilesLater() }
        guard let firstKept, let oldest = index.files.first?.number, firstKept > oldest else { return 0 }
        try CommitJournal.removeFiles(below: firstKept, in: directory, on: fs, index: index)
        return Int(firstKept - oldest)
    }
}
