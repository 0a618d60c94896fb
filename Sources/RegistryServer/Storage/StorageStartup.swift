import Platform
import Dispatch
import Logging
import RegistryCore
import RegistryStorage
import RegistryWire

/// What a node's storage held at start-up, rebuilt into memory.
struct RecoveredStorage {
    var registry: RegistryState
    /// What the node holds of every log: the snapshot's, then what the journal added.
    var versionVector: VersionVector
    /// The newest HLC the snapshot or the journal recorded.
    var clock: HLCTimestamp
    var metadata: NodeMetadata
    /// The journal file the node appends to next.
    var nextJournalFile: UInt64
    var index: JournalIndex
    /// The snapshot loaded, when there was a usable one.
    var snapshotLabel: UInt64?
    /// Operations the journal added past the snapshot.
    var replayedOperations: Int
    /// The events of those operations, for watchers (``FeedStart``).
    var feed: ChangeFeed
}

/// What the replay records for watchers: how many events the node keeps, and the configured
/// vendor rules whose binding policies apply until the cluster changes its rules.
struct FeedStart {
    var capacity: Int
    var configuredRules: [VendorRule]
}

/// Opens a data directory and rebuilds the node's state from it: its metadata (or a new identity
/// for an empty directory), the newest usable snapshot, then the journal past it. It refuses,
/// with a message that says what to do, to serve a state with holes: a missing or damaged journal
/// file, a journal that does not reach back to what the snapshots cover, or a data directory of
/// an earlier version. The rebuilt registry's index tables come from `tables`, its claim index
/// seeded with `claimSeed` (``RegistryState/init(expectedDevices:claimSeed:tables:)``).
enum StorageStartup {
    static func open(
        fs: any FileSystem, directory: String, configuredNodeID: NodeID?, identifierKey: UInt64, expectedDevices: Int,
        claimSeed: UInt64?, tables: any TableAllocator = HeapTableAllocator(), wallClock: () -> UInt64,
        epochEntropy: UInt64 = UInt64.random(in: .min ... .max), feedStart: FeedStart = FeedStart(capacity: 1_000, configuredRules: []),
        logger: Logger
    ) throws(NodeStartupError) -> RecoveredStorage {
        let started = SystemClock.monotonicNanos()
        return try NodeStartupError.typed {
            let names = try fs.list(directory)
            if names.contains(DataDirectory.legacyDatabaseName) { throw NodeStartupError.olderDataDirectory(directory) }
            try removeUnfinished(names, in: directory, on: fs, logger: logger)
            let metadata = try identity(
                fs: fs, directory: directory, names: names, configured: configuredNodeID, identifierKey: identifierKey,
                wallClock: wallClock, epochEntropy: epochEntropy, logger: logger)

            // Sized up front for what the journal may add, so that replaying it does not grow the
            // indexes (moving their entries, probing them near full while a bigger table is made
            // ready; docs/performance.md, "Replaying registrations", has what that cost).
            let devices = max(expectedDevices, try Self.devicesTheJournalMayHold(in: directory, on: fs))
            let (snapshot, problems) = try SnapshotStore.loadNewest(
                in: directory, on: fs, expectedDevices: devices, claimSeed: claimSeed, tables: tables, logger: logger)
            var replayer = Replayer(
                registry: snapshot?.registry ?? RegistryState(expectedDevices: devices, claimSeed: claimSeed, tables: tables),
                vector: snapshot?.metadata.versionVector ?? VersionVector())
            // The replay records the events of what it applies: watchers resume from them. What
            // the snapshot covers is the feed's floor.
            replayer.registry.recordEvents(configuredRules: feedStart.configuredRules)
            var feed = ChangeFeed(capacity: feedStart.capacity, holding: replayer.vector, pages: UnforkedTableAllocator())
            var clock = snapshot?.metadata.clock ?? .zero
            var gap: (log: LogID, missing: ClosedRange<UInt64>)?
            // The journal is read and decoded on a thread of its own while this one applies it.
            let recovered = try JournalReadAhead.run(
                named: "journal-read", skippingWhat: replayer.vector,
                reading: { (give) throws(StorageError) in
                    try CommitJournal.recover(in: directory, on: fs) { (_, entry) throws(StorageError) in try give(entry) }
                },
                applying: { (entry) throws(StorageError) in
                    guard gap == nil else { return }
                    clock = max(clock, HLCTimestamp(rawValue: entry.clock))
                    defer { feed.publish(replayer.staging.takeAll(), through: replayer.vector) }
                    for segment in entry.segments {
                        if case .gap(let log, let missing) = try replayer.apply(segment) {
                            gap = (log, missing)
                            return
                        }
                    }
                })
            if let gap {
                let reason =
                    snapshot == nil && !problems.isEmpty
                    ? "no snapshot is usable (\(problems.joined(separator: "; "))) and the journal does not reach back to the start of \(gap.log): operations \(gap.missing) are missing"
                    : "operations \(gap.missing) of \(gap.log) are in neither the snapshot nor the journal"
                throw NodeStartupError.storage(.corrupt(reason + "; the node will not serve a state with holes. Restore the data directory from a backup, or start the node on an empty directory to rejoin from its peers"))
            }
            if let torn = recovered.tornTail {
                logger.warning(
                    "discarded the unfinished last entry of the commit journal; it was never acknowledged", metadata: ["where": "\(torn)"])
            }
            if let unsealed = recovered.unsealed {
                try CommitJournal.seal(unsealed.number, at: unsealed.offset, in: directory, on: fs)
            }
            var files = recovered.files
            if let unsealed = recovered.unsealed, let last = files.indices.last {
                files[last].sealed = true
                files[last].durableBytes = unsealed.offset + JournalEntry.headerBytes
            }
            let index = JournalIndex(files: files, trimmedThrough: trimmedThrough(files: files, snapshot: snapshot))
            let state = RecoveredStorage(
                registry: replayer.registry, versionVector: replayer.vector, clock: max(clock, replayer.newest), metadata: metadata,
                nextJournalFile: (files.last?.number ?? 0) + 1, index: index, snapshotLabel: snapshot?.label,
                replayedOperations: replayer.applied, feed: feed)
            logger.info(
                "recovered the node's state",
                metadata: [
                    "snapshot": "\(snapshot.map { SnapshotFile.name(label: $0.label) } ?? "none")",
                    "journal_files": "\(files.count)", "replayed": "\(replayer.applied)",
                    "devices": "\(state.registry.deviceCount)",
                    "seconds": "\(Double((SystemClock.monotonicNanos() - started) / 1_000_000) / 1_000)",
                ])
            return state
        }
    }

    /// Deletes what a process that ended mid-way left unfinished: a snapshot being written
    /// (`.snap.tmp`) and a peer's snapshot being received. Nothing reads them again (a transfer
    /// starts afresh), and each may be as large as the state: left, they take the room the next
    /// snapshot, or the journal, needs.
    static func removeUnfinished(_ names: [String], in directory: String, on fs: any FileSystem, logger: Logger) throws(StorageError) {
        let unfinished = names.filter { SnapshotStore.isUnfinished($0) || $0 == Snapshotter.incomingName }
        guard !unfinished.isEmpty else { return }
        for name in unfinished { try fs.remove(directory + "/" + name) }
        try fs.syncDirectory(directory)
        logger.info("removed files a stopped process left unfinished", metadata: ["files": "\(unfinished.joined(separator: ", "))"])
    }

    /// Journal bytes a registration that creates a device takes at least in the usual shape (its
    /// record header, device ID, creation time, origin, vendor, bundle ID and one claim): the
    /// journal's size over this is about the most devices replaying it can create. Only a sizing
    /// hint: more devices than that grow the indexes as they would anyway.
    static let journalBytesPerDevice = 100

    /// About the most devices the journal in `directory` can create (see ``journalBytesPerDevice``).
    static func devicesTheJournalMayHold(in directory: String, on fs: any FileSystem) throws(StorageError) -> Int {
        var bytes = 0
        for number in try CommitJournal.files(in: directory, on: fs) {
            let file = try fs.open(CommitJournal.path(in: directory, number: number), create: false)
            defer { fs.close(file) }
            bytes += try fs.size(file)
        }
        return min(bytes / journalBytesPerDevice, 1 << 30)
    }

    /// The directory's node metadata, checked against the configured node ID and identifier key,
    /// with a new epoch (see below), or a new identity (the configured ID or a generated one, and
    /// a first epoch) for an empty directory. Either way the epoch (``EpochRule``) is written
    /// before the node writes anything in it.
    private static func identity(
        fs: any FileSystem, directory: String, names: [String], configured: NodeID?, identifierKey: UInt64, wallClock: () -> UInt64,
        epochEntropy: UInt64, logger: Logger
    ) throws -> NodeMetadata {
        if let stored = try NodeMetadataFile.read(from: directory, on: fs) {
            if let configured, configured.value != stored.nodeID {
                throw NodeStartupError.nodeIDMismatch(stored: stored.nodeID, configured: configured.value)
            }
            guard let storedKey = stored.identifierKey else { throw NodeStartupError.identifiersNotHashed(directory) }
            guard storedKey == identifierKey else { throw NodeStartupError.identifierKeyMismatch(directory) }
            // Every start writes in a new log. A directory cannot tell whether it is the newest
            // copy of itself (a restored backup, a copied directory or a rolled-back disk looks
            // exactly like a clean stop), and peers may hold operations of the stored epoch that
            // this copy never wrote: continuing that log would give their (node, epoch, sequence)
            // names to other operations. The stored epoch's operations stay readable as they were.
            var reopened = stored
            reopened.epoch = EpochRule.next(after: stored.epoch, wallMillis: wallClock(), entropy: epochEntropy)
            try NodeMetadataFile.write(reopened, to: directory, on: fs)
            logger.info("opened a new epoch", metadata: ["node": "\(stored.nodeID)", "epoch": "\(reopened.epoch)", "previous": "\(stored.epoch)"])
            return reopened
        }
        if names.contains(where: { $0.hasPrefix("journal-") || $0.hasPrefix("snapshot-") }) {
            throw StorageError.corrupt(
                "\(directory) holds journal or snapshot files but no \(NodeMetadataFile.name): it cannot say whose they are")
        }
        var generator = SystemRandomNumberGenerator()
        let nodeID = configured?.value ?? "node-\(String(generator.next() & 0xFFFF_FFFF, radix: 16))"
        let metadata = NodeMetadata(
            nodeID: nodeID, epoch: EpochRule.next(after: nil, wallMillis: wallClock(), entropy: epochEntropy), identifierKey: identifierKey)
        try NodeMetadataFile.write(metadata, to: directory, on: fs)
        logger.info("initialised a new data directory", metadata: ["node": "\(nodeID)", "epoch": "\(metadata.epoch)"])
        return metadata
    }

    /// For each log, the highest sequence a reader cannot read from the journal: the start of the
    /// log, or a hole between files (where a snapshot from a peer took over), up to the last that
    /// the files do not follow on from; and, when the snapshot covers past the files, all it covers.
    private static func trimmedThrough(files: [JournalIndex.File], snapshot: SnapshotStore.Loaded?) -> [LogID: UInt64] {
        var trimmed = [LogID: UInt64]()
        var next = [LogID: UInt64]()
        for file in files {
            for (log, range) in file.ranges {
                if range.lowerBound > next[log] ?? 1 { trimmed[log] = range.lowerBound - 1 }
                next[log] = max(next[log] ?? 1, range.upperBound + 1)
            }
        }
        for (log, sequence) in snapshot?.metadata.versionVector.logs ?? [] {
            let key = log
            if sequence >= next[key] ?? 1 { trimmed[key] = sequence }
        }
        return trimmed
    }
}
