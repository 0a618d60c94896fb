import Logging
import Platform
import RegistryAuth
import RegistryCore
import RegistryStorage

/// What a node starts from: the keys its cluster secret gives, and the state storage recovered
/// (the newest snapshot with the journal after it), made into the engine's first ``EngineCore``.
struct EngineStartup {
    let identifierKey: IdentifierKey
    let recovered: RecoveredStorage
    let nodeID: NodeID
    let peerIdentity: PeerIdentity
    /// Where the serving state's tables come from, a peer's snapshot's included.
    let servingTables: HugePageTableAllocator
    let core: EngineCore
    /// The configured vendor rules with the default scope the data directory pinned
    /// (``DefaultScopePin``), and what became of the configured scope.
    let defaultScope: DefaultScopePin

    /// Resolves the cluster secret and opens the storage in `configuration.dataDirectory` on `fs`
    /// (see ``RegistryEngine/init(configuration:logger:wallClock:fs:epochEntropy:onFatalError:)``).
    init(
        configuration: NodeConfiguration, fs: any FileSystem, logger: Logger, wallClock: @escaping @Sendable () -> UInt64,
        epochEntropy: UInt64
    ) throws(NodeStartupError) {
        let path = configuration.dataDirectory
        let secret = try ClusterSecret.resolve(
            configured: configuration.clusterSecret, clusterID: configuration.clusterID, fs: fs, directory: path, logger: logger)
        let mintingKey = MintingKey(secret: secret)
        identifierKey = IdentifierKey(secret: secret)
        servingTables = HugePageTableAllocator(releaseGradually: configuration.releaseTablesGradually)
        recovered = try StorageStartup.open(
            fs: fs, directory: path, configuredNodeID: configuration.nodeID, identifierKey: identifierKey.fingerprint,
            expectedDevices: configuration.expectedDevices, claimSeed: identifierKey.claimIndexSeed, tables: servingTables, wallClock: wallClock, epochEntropy: epochEntropy,
            feedStart: FeedStart(capacity: configuration.watchHistory, configuredRules: configuration.vendorRules.rules), logger: logger)
        nodeID = NodeID(trusted: recovered.metadata.nodeID)
        defaultScope = try Self.pinDefaultScope(configuration: configuration, recovered: recovered, fs: fs)
        let rules = defaultScope.rules
        let epoch = recovered.metadata.epoch
        peerIdentity = PeerIdentity(
            clusterID: configuration.clusterID, nodeID: nodeID, epoch: epoch, mintingKeyFingerprint: mintingKey.fingerprint,
            proof: PeerProof(secret: secret), vendorRulesFingerprint: rules.defaultScopeFingerprint)
        let node = NodeState(
            registry: recovered.registry,
            clock: HybridLogicalClock(last: recovered.clock, maxForwardDriftMillis: configuration.maxClockSkewMillis), nodeID: nodeID,
            epoch: epoch, nextSequence: recovered.versionVector[peerIdentity.ownLog] + 1, versionVector: recovered.versionVector,
            rules: rules, limits: configuration.limits, mintingKey: mintingKey, identifierKey: identifierKey)
        let policy = SnapshotPolicy(
            everyOperations: UInt64(configuration.snapshotEveryOperations), everySeconds: UInt64(configuration.snapshotEverySeconds),
            coveredOperations: recovered.snapshotLabel ?? 0, nowNanos: SystemClock.monotonicNanos())
        // Tombstones already held count as new: the node does not know whether the snapshots that
        // erased their devices' bytes were taken before it stopped.
        core = EngineCore(
            node: node, durable: DurableState(recovered: recovered.versionVector), snapshotPolicy: policy,
            erasure: ErasureSchedule(withinSeconds: configuration.erasureWithinSeconds))
    }

    /// Reads the directory's default-scope pin, decides with the configured scope, and writes
    /// the pin when it changed.
    private static func pinDefaultScope(
        configuration: NodeConfiguration, recovered: RecoveredStorage, fs: any FileSystem
    ) throws(NodeStartupError) -> DefaultScopePin {
        let directory = configuration.dataDirectory
        let configured = configuration.vendorRules
        var earlierDepth = 2
        if case .labels(let depth) = configured.defaultScope { earlierDepth = depth }
        do {
            let decision = try DefaultScopePin(
                pinned: try DefaultScopePinFile.read(from: directory, on: fs), configured: configured, state: recovered.registry,
                earlierDepth: earlierDepth)
            if decision.writesPin { try DefaultScopePinFile.write(decision.rules.defaultScope, to: directory, on: fs) }
            return decision
        } catch let error as StorageError {
            throw .storage(error)
        } catch {
            // The configured rules were valid, and a pinned depth is at least 2: not reached.
            throw .storage(.corrupt("default vendor scope: \(error)"))
        }
    }

    /// Says what became of the configured default vendor scope.
    func logDefaultScope(_ logger: Logger) {
        let serving = "\(defaultScope.rules.defaultScope)"
        switch defaultScope.outcome {
        case .same: break
        case .pinned: logger.info("default vendor scope pinned", metadata: ["scope": "\(serving)"])
        case .pinnedEarlierDepth:
            logger.notice("data directory predates default-vendor pins; pinned the depth it served", metadata: ["scope": "\(serving)"])
        case .replaced(let previous):
            logger.notice(
                "the configured default vendor scope moves no device this node holds; serving and pinning it",
                metadata: ["scope": "\(serving)", "previous": "\(previous)"])
        case .kept(let configured, let devices, let bundles):
            logger.warning(
                "the configured default vendor scope would move devices to other vendors; keeping the pinned one (docs/identity.md, \"The default vendor\")",
                metadata: [
                    "serving": "\(serving)", "configured": "\(configured)", "devices": "\(devices)",
                    "bundles": "\(bundles.prefix(5).map(\.value))",
                ])
        }
    }

    /// The journal's writer, going on in the file after the last one recovered.
    func logWriter(configuration: NodeConfiguration, fs: any FileSystem) throws(NodeStartupError) -> LogWriter {
        do {
            return try LogWriter(
                fs: fs, directory: configuration.dataDirectory, journalFile: recovered.nextJournalFile,
                fileBytes: configuration.journalFileBytes, index: recovered.index)
        } catch {
            throw .storage(error)
        }
    }

    /// The owner of the node's snapshot files. Its own state's tables are huge pages, as the
    /// serving state's, but freed at once (see ``HugePageTableAllocator``). A peer's snapshot
    /// must leave room for two journal files.
    func snapshotter(configuration: NodeConfiguration, fs: any FileSystem, logger: Logger) -> Snapshotter {
        Snapshotter(
            fs: fs, directory: configuration.dataDirectory, index: recovered.index, nodeID: nodeID, epoch: peerIdentity.epoch,
            expectedDevices: configuration.expectedDevices, claimSeed: identifierKey.claimIndexSeed, forks: configuration.snapshotsByFork, tables: HugePageTableAllocator(inBackground: false),
            spareBytes: 2 * UInt64(configuration.journalFileBytes), logger: logger)
    }

    /// Logs what storage holds.
    func logOpened(_ logger: Logger) {
        logger.info(
            "storage open",
            metadata: [
                "operations": "\(core.durable.operations)", "devices": "\(recovered.registry.deviceCount)",
                "claims": "\(recovered.registry.claimCount)", "epoch": "\(peerIdentity.epoch)",
                "next_sequence": "\(core.node.nextSequence)",
            ])
    }
}
