import RegistryCore

extension NodeSetting {
    /// Every setting of a node, in the order `--help` lists them. The config file may also hold
    /// ``NodeConfiguration/fileOnlyKeys`` (vendor rules), which have no flag.
    public static let all: [NodeSetting] = [
        host, port, dataDir, nodeId, clusterId, logLevel, maxFrameBytes, maxBatchSize, maxInFlight, drainTimeoutSeconds,
        eventLoopThreads, expectedDevices, releaseTablesGradually, commitDelayUs, snapshotEveryOperations, snapshotEverySeconds, snapshotBy, erasureWithin, journalFileBytes, publicSuffixList, peers,
        clusterSecret, maxClockSkew, ackReplicas, replicaTimeout, causalTimeout, maxConnections, maxWatchers, watchHistory, watchProgress, advertise, tokenSecret, insecure, logFormat,
        metricsPort, tlsCert, tlsKey, tlsCA,
    ]

    static let tlsCert = NodeSetting(
        flag: "tls-cert", environment: "REGISTRY_TLS_CERT", fileKey: "tlsCert", fileType: .string, defaultText: "none: TLS off",
        help: "PEM certificate (chain) the node serves, and presents to peers; turns TLS on for clients and peers.",
        discussion: """
            Needs --tls-key and --tls-ca. Peers prove membership with mutual TLS: each presents its certificate, and \
            each checks that the other's chains to --tls-ca. Clients need no certificate; they verify the node's.
            """
    ) { text, configuration in configuration.tlsCertificate = text }

    static let tlsKey = NodeSetting(
        flag: "tls-key", environment: "REGISTRY_TLS_KEY", fileKey: "tlsKey", fileType: .string, defaultText: "none",
        help: "PEM private key of --tls-cert."
    ) { text, configuration in configuration.tlsKey = text }

    static let tlsCA = NodeSetting(
        flag: "tls-ca", environment: "REGISTRY_TLS_CA", fileKey: "tlsCa", fileType: .string, defaultText: "none",
        help: "PEM certificates of the CA that signs the cluster's node certificates; peers must chain to it."
    ) { text, configuration in configuration.tlsCA = text }

    static let metricsPort = NodeSetting(
        flag: "metrics-port", environment: "REGISTRY_METRICS_PORT", fileKey: "metricsPort", fileType: .wholeNumber,
        defaultText: "none: no HTTP listener",
        help: "HTTP port, on --host, for /metrics (Prometheus text format), /healthz and /readyz; 0 picks a free one.",
        discussion: """
            /healthz answers 200 while the process serves. /readyz answers 200 once storage is open and the journal \
            replayed and, in a cluster, once the node is within 10000 operations of every peer it has heard from; \
            otherwise 503 with the reason. docs/operations.md lists the metrics.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.metricsPort = try SettingValueError.wholeNumber(text, in: 0...65_535, "metrics port")
    }

    static let tokenSecret = NodeSetting(
        flag: "token-secret", environment: "REGISTRY_TOKEN_SECRET", fileKey: "tokenSecret", fileType: .string,
        defaultText: "none, no tokens: every connection may do everything",
        help: "Secret that client tokens are signed with; with it set, every client must present a token.",
        discussion: """
            `registryctl token issue` signs a token with the same secret. A token names the vendors it covers and its \
            roles (register, read, admin), and expires; the node checks its signature when a connection says hello, \
            with no lookup (docs/security.md).
            """
    ) { text, configuration throws(SettingValueError) in
        guard text.utf8.count >= 16 else { throw SettingValueError("the token secret must be at least 16 bytes") }
        configuration.tokenSecret = text
    }

    static let insecure = NodeSetting(
        flag: "insecure", environment: "REGISTRY_INSECURE", fileKey: "insecure", fileType: .boolean,
        defaultText: "false", help: "Allow listening beyond loopback without TLS and tokens (logged as a warning)."
    ) { text, configuration throws(SettingValueError) in
        guard let value = Bool(text) else { throw SettingValueError("insecure \(text.debugDescription) is not true or false") }
        configuration.insecure = value
    }

    static let logFormat = NodeSetting(
        flag: "log-format", environment: "REGISTRY_LOG_FORMAT", fileKey: "logFormat", fileType: .string, defaultText: "text",
        help: "text, or json: one JSON object a line."
    ) { text, configuration throws(SettingValueError) in
        guard let format = LogFormat(rawValue: text) else { throw SettingValueError("log format \(text.debugDescription) is not text or json") }
        configuration.logFormat = format
    }

    static let advertise = NodeSetting(
        flag: "advertise", environment: "REGISTRY_ADVERTISE", fileKey: "advertise", fileType: .string,
        defaultText: "the listening host:port",
        help: "host:port at which the other nodes reach this one; recorded in the cluster's membership when the node starts."
    ) { text, configuration throws(SettingValueError) in
        configuration.advertise = try PeerAddress(parsing: text).description
    }

    static let ackReplicas = NodeSetting(
        flag: "ack-replicas", environment: "REGISTRY_ACK_REPLICAS", fileKey: "ackReplicas", fileType: .wholeNumber,
        defaultText: "0, answer once durable here",
        help: "Peers that must hold a registration durably before it is answered (0...64); a request may ask for its own.",
        discussion: """
            0 answers once the write is durable on this node and replicates it afterwards: a node lost for good before \
            replicating loses its last writes. N answers only once N peers also hold it; after --replica-timeout the \
            answer is a retryable REPLICATION_TIMEOUT, and the write is kept and still replicates.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.ackReplicas = try SettingValueError.wholeNumber(text, in: 0...64, "ack replicas")
    }

    static let replicaTimeout = NodeSetting(
        flag: "replica-timeout", environment: "REGISTRY_REPLICA_TIMEOUT", fileKey: "replicaTimeout", fileType: .number,
        defaultText: "5", help: "Seconds a write waits for its --ack-replicas peers before a retryable error (0.001...3600)."
    ) { text, configuration throws(SettingValueError) in
        guard let seconds = Double(text), (0.001...3_600).contains(seconds) else {
            throw SettingValueError("replica timeout \(text.debugDescription) is not 0.001...3600 seconds")
        }
        configuration.replicaTimeoutMillis = UInt64(seconds * 1_000)
    }

    static let causalTimeout = NodeSetting(
        flag: "causal-timeout", environment: "REGISTRY_CAUSAL_TIMEOUT", fileKey: "causalTimeout", fileType: .number,
        defaultText: "2",
        help: "Seconds a request carrying a causal token, or a vendor rule change, waits for operations this node lacks, before a retryable error (0...3600).",
        discussion: """
            A client sends the token of an earlier answer (ClientFrame.after) to read its own writes on any node. A \
            node that does not hold what the token names yet holds the request until its peers' operations arrive; \
            after this long it answers NOT_CAUGHT_UP, naming the nodes that hold them. 0 answers that at once. A \
            vendor rule change waits up to 2 s for every other node of the cluster to say what it holds, then as \
            long as this for those operations, then is refused (UNAVAILABLE): with 0, only a node that lacks \
            nothing at once decides one.
            """
    ) { text, configuration throws(SettingValueError) in
        guard let seconds = Double(text), (0...3_600).contains(seconds) else {
            throw SettingValueError("causal timeout \(text.debugDescription) is not 0...3600 seconds")
        }
        configuration.causalTimeoutMillis = UInt64(seconds * 1_000)
    }

    static let maxConnections = NodeSetting(
        flag: "max-connections", environment: "REGISTRY_MAX_CONNECTIONS", fileKey: "maxConnections", fileType: .wholeNumber,
        defaultText: "10000",
        help: "Connections the node holds at once, clients', peers' and watchers' (1...1000000); one more is refused with a retryable TOO_MANY_CONNECTIONS.",
        discussion: """
            The refusal takes the place of the hello's answer, and the connection closes. Each peer holds one \
            connection to this node, so leave room for them. Each connection is a file descriptor: at start the node \
            raises its soft limit of open files to the hard one, and warns when this limit does not fit under it.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.maxConnections = try SettingValueError.wholeNumber(text, in: 1...1_000_000, "max connections")
    }

    static let maxWatchers = NodeSetting(
        flag: "max-watchers", environment: "REGISTRY_MAX_WATCHERS", fileKey: "maxWatchers", fileType: .wholeNumber,
        defaultText: "1000",
        help: "Watch streams the node serves at once (1...100000); one more is refused with a retryable TOO_MANY_WATCHERS.",
        discussion: """
            Each watcher is a connection that sent a WatchRequest (registryctl watch, the client's watch). An idle \
            watcher costs its connection and a timer; a busy one reads the node's feed, never a copy of it.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.maxWatchers = try SettingValueError.wholeNumber(text, in: 1...100_000, "max watchers")
    }

    static let watchHistory = NodeSetting(
        flag: "watch-history", environment: "REGISTRY_WATCH_HISTORY", fileKey: "watchHistory", fileType: .wholeNumber,
        defaultText: "1000000",
        help: "Events the node keeps for watchers to resume from (1000...100000000), 88 bytes each in memory.",
        discussion: """
            A watcher whose cursor names events older than the node keeps (or than the snapshot it restarted from) \
            gets CURSOR_EXPIRED and must read the state again. More history lets watchers pause longer, for memory: \
            an event takes 88 bytes (a merge's, an account's and a split's more, held apart with their lists of devices), \
            so the default holds about 88 MB once full.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.watchHistory = try SettingValueError.wholeNumber(text, in: 1_000...100_000_000, "watch history")
    }

    static let watchProgress = NodeSetting(
        flag: "watch-progress", environment: "REGISTRY_WATCH_PROGRESS", fileKey: "watchProgress", fileType: .number,
        defaultText: "1",
        help: "Seconds without a matching event after which a watcher is sent its cursor anyway (0.01...3600).",
        discussion: """
            The progress event keeps an idle or narrowly filtered watcher's cursor close to the node's, so that it \
            can still resume after the node's history has moved on.
            """
    ) { text, configuration throws(SettingValueError) in
        guard let seconds = Double(text), (0.01...3_600).contains(seconds) else {
            throw SettingValueError("watch progress \(text.debugDescription) is not 0.01...3600 seconds")
        }
        configuration.watchProgressMillis = UInt64(seconds * 1_000)
    }

    static let peers = NodeSetting(
        flag: "peers", environment: "REGISTRY_PEERS", fileKey: "peers", fileType: .string, defaultText: "none, a single node",
        help: "Other nodes of the cluster, host:port,... (names are resolved again on every reconnect).",
        discussion: """
            The node streams its operations to each peer and takes theirs. A list may name every member, this node \
            included: a node recognises its own address and skips it. A new node joins by naming any existing member; \
            the members it names replicate to it once it connects.
            """
    ) { text, configuration throws(SettingValueError) in
        configuration.peers = try PeerAddress.list(parsing: text)
    }

    static let clusterSecret = NodeSetting(
        flag: "cluster-secret", environment: "REGISTRY_CLUSTER_SECRET", fileKey: "clusterSecret", fileType: .string,
        defaultText: "a single node's own random secret (required with --peers)",
        help: "Secret from which every node derives its keys (minting, identifier hashing, peer proofs); the same on every node.",
        discussion: """
            A first install gets an ID derived from the vendor and its IDFV (or keychain UUID) under this key, so \
            sibling apps that register at the same moment through two nodes get one ID; identifiers are stored as \
            keyed hashes under it, and peers prove it to each other. Make one with `openssl rand -hex 32`. A node \
            with --peers refuses to start without it (exit 78). A single node without it makes a random secret on \
            its first start and keeps it in its data directory as cluster.secret (mode 0600).
            """
    ) { text, configuration throws(SettingValueError) in
        guard !text.isEmpty else { throw SettingValueError("the cluster secret must not be empty") }
        configuration.clusterSecret = text
    }

    static let maxClockSkew = NodeSetting(
        flag: "max-clock-skew", environment: "REGISTRY_MAX_CLOCK_SKEW", fileKey: "maxClockSkew", fileType: .number,
        defaultText: "60", help: "Seconds a peer's timestamp may be ahead of this node's clock before its batch is refused (0.001...86400)."
    ) { text, configuration throws(SettingValueError) in
        guard let seconds = Double(text), (0.001...86_400).contains(seconds) else {
            throw SettingValueError("max clock skew \(text.debugDescription) is not 0.001...86400 seconds")
        }
        configuration.maxClockSkewMillis = UInt64(seconds * 1_000)
    }

    static let host = NodeSetting(
        flag: "host", environment: "REGISTRY_HOST", fileKey: "host", fileType: .string, defaultText: "127.0.0.1",
        help: "Address to listen on."
    ) { text, configuration in configuration.host = text }

    static let port = NodeSetting(
        flag: "port", environment: "REGISTRY_PORT", fileKey: "port", fileType: .wholeNumber, defaultText: "7400",
        help: "TCP port; 0 picks a free one."
    ) { text, configuration throws(SettingValueError) in
        configuration.port = try SettingValueError.wholeNumber(text, in: 0...65_535, "port")
    }

    static let dataDir = NodeSetting(
        flag: "data-dir", environment: "REGISTRY_DATA_DIR", fileKey: "dataDir", fileType: .string, defaultText: "./data",
        help: "Existing directory for the node's durable state."
    ) { text, configuration in configuration.dataDirectory = text }

    static let nodeId = NodeSetting(
        flag: "node-id", environment: "REGISTRY_NODE_ID", fileKey: "nodeId", fileType: .string,
        defaultText: "stored in the data directory, or generated",
        help: "Node name (lower-case letters, digits, '-')."
    ) { text, configuration throws(SettingValueError) in
        do {
            configuration.nodeID = try NodeID(text)
        } catch {
            throw SettingValueError("\(error)")
        }
    }

    static let clusterId = NodeSetting(
        flag: "cluster-id", environment: "REGISTRY_CLUSTER_ID", fileKey: "clusterId", fileType: .string, defaultText: "default",
        help: "Cluster name reported to clients."
    ) { text, configuration throws(SettingValueError) in
        guard !text.isEmpty else { throw SettingValueError("the cluster ID must not be empty") }
        configuration.clusterID = text
    }

    static let logLevel = NodeSetting(
        flag: "log-level", environment: "REGISTRY_LOG_LEVEL", fileKey: "logLevel", fileType: .string, defaultText: "info",
        help: "trace, debug, info, notice, warning, error or critical."
    ) { text, configuration throws(SettingValueError) in
        guard NodeConfiguration.logLevels.contains(text) else {
            throw SettingValueError("log level \(text.debugDescription) is not one of \(NodeConfiguration.logLevels.joined(separator: ", "))")
        }
        configuration.logLevel = text
    }

    static let maxFrameBytes = NodeSetting(
        flag: "max-frame-bytes", environment: "REGISTRY_MAX_FRAME_BYTES", fileKey: "maxFrameBytes", fileType: .wholeNumber,
        defaultText: "1048576", help: "Largest frame accepted, in bytes (4096...67108864); peers size their batches and snapshot chunks to it."
    ) { text, configuration throws(SettingValueError) in
        configuration.limits.maxFrameBytes = UInt32(try SettingValueError.wholeNumber(text, in: 4096...(64 << 20), "max frame bytes"))
    }

    static let maxBatchSize = NodeSetting(
        flag: "max-batch-size", environment: "REGISTRY_MAX_BATCH_SIZE", fileKey: "maxBatchSize", fileType: .wholeNumber,
        defaultText: "1000", help: "Most registrations per batch frame (1...100000)."
    ) { text, configuration throws(SettingValueError) in
        configuration.limits.maxBatchSize = UInt32(try SettingValueError.wholeNumber(text, in: 1...100_000, "max batch size"))
    }

    static let maxInFlight = NodeSetting(
        flag: "max-in-flight", environment: "REGISTRY_MAX_IN_FLIGHT", fileKey: "maxInFlight", fileType: .wholeNumber,
        defaultText: "1024", help: "Unanswered requests per connection before it stops reading (1...1000000)."
    ) { text, configuration throws(SettingValueError) in
        configuration.limits.maxInFlight = UInt32(try SettingValueError.wholeNumber(text, in: 1...1_000_000, "max in flight"))
    }

    static let drainTimeoutSeconds = NodeSetting(
        flag: "drain-timeout-seconds", environment: "REGISTRY_DRAIN_TIMEOUT_SECONDS", fileKey: "drainTimeoutSeconds",
        fileType: .number, defaultText: "10",
        help: "Seconds a graceful stop waits for in-flight requests before closing connections (0...3600)."
    ) { text, configuration throws(SettingValueError) in
        guard let seconds = Double(text), (0...3_600).contains(seconds) else {
            throw SettingValueError("drain timeout \(text.debugDescription) is not 0...3600 seconds")
        }
        configuration.drainTimeoutSeconds = seconds
    }

    static let eventLoopThreads = NodeSetting(
        flag: "event-loop-threads", environment: "REGISTRY_EVENT_LOOP_THREADS", fileKey: "eventLoopThreads",
        fileType: .wholeNumber, defaultText: "one per CPU core", help: "Threads serving connections (1...256)."
    ) { text, configuration throws(SettingValueError) in
        configuration.eventLoopThreads = try SettingValueError.wholeNumber(text, in: 1...256, "event-loop threads")
    }

    static let expectedDevices = NodeSetting(
        flag: "expected-devices", environment: "REGISTRY_EXPECTED_DEVICES", fileKey: "expectedDevices",
        fileType: .wholeNumber, defaultText: "0, start small and grow",
        help: "Devices to size the in-memory indexes for at start-up (0...1073741824).",
        discussion: "Below this many devices the indexes never grow, so no request pays for a bigger table; they take 80 bytes of memory per expected device from the start, and nothing more is allocated for them below it."
    ) { text, configuration throws(SettingValueError) in
        configuration.expectedDevices = try SettingValueError.wholeNumber(text, in: 0...RegistryState.maxExpectedDevices, "expected devices")
    }

    static let releaseTablesGradually = NodeSetting(
        flag: "release-tables-gradually", environment: "REGISTRY_RELEASE_TABLES_GRADUALLY", fileKey: "releaseTablesGradually",
        fileType: .boolean, defaultText: "false",
        help: "Give a grown index's old table back to the kernel 16 MiB a second, on a thread of its own, instead of at once.",
        discussion: "For virtual machines that report freed memory to their hypervisor (free page reporting): there, gigabytes freed at once stalled a busy node for tens of milliseconds. It holds the memory about a minute per GiB longer; a node sized with --expected-devices frees no table."
    ) { text, configuration throws(SettingValueError) in
        guard let value = Bool(text) else { throw SettingValueError("release-tables-gradually \(text.debugDescription) is not true or false") }
        configuration.releaseTablesGradually = value
    }

    static let commitDelayUs = NodeSetting(
        flag: "commit-delay-us", environment: "REGISTRY_COMMIT_DELAY_US", fileKey: "commitDelayMicros", fileType: .wholeNumber,
        defaultText: "300",
        help: "Microseconds a busy log writer waits for more operations before a small group commit (0...10000).",
        discussion: "Only a commit that follows another directly and would carry fewer than 400 operations waits, so a quiet node commits at once. Under load, fewer and bigger commits save the CPU and the disk requests each journal write and fdatasync costs; 0 commits at once always."
    ) { text, configuration throws(SettingValueError) in
        configuration.commitPacing.delayMicros = UInt32(try SettingValueError.wholeNumber(text, in: 0...Int(CommitPacing.maxDelayMicros), "commit delay"))
    }

    static let snapshotEveryOperations = NodeSetting(
        flag: "snapshot-every-operations", environment: "REGISTRY_SNAPSHOT_EVERY_OPERATIONS", fileKey: "snapshotEveryOperations",
        fileType: .wholeNumber, defaultText: "1000000",
        help: "Take a snapshot once this many operations were logged since the last one, and at least as many as it covers (0...10^10; 0: not by count).",
        discussion: "A snapshot bounds what a start-up replays and lets the journal files it covers go. It is taken in the background (see --snapshot-by), so requests do not wait for it. Its cost grows with the registry, hence the second condition."
    ) { text, configuration throws(SettingValueError) in
        configuration.snapshotEveryOperations = try SettingValueError.wholeNumber(text, in: 0...10_000_000_000, "snapshot interval")
    }

    static let snapshotEverySeconds = NodeSetting(
        flag: "snapshot-every-seconds", environment: "REGISTRY_SNAPSHOT_EVERY_SECONDS", fileKey: "snapshotEverySeconds",
        fileType: .wholeNumber, defaultText: "3600",
        help: "Take a snapshot once this many seconds passed since the last one, when anything was logged (0...10^6; 0: not by time)."
    ) { text, configuration throws(SettingValueError) in
        configuration.snapshotEverySeconds = try SettingValueError.wholeNumber(text, in: 0...1_000_000, "snapshot period")
    }

    static let snapshotBy = NodeSetting(
        flag: "snapshot-by", environment: "REGISTRY_SNAPSHOT_BY", fileKey: "snapshotBy", fileType: .string, defaultText: "fork",
        help: "How a background snapshot is taken: fork (a forked copy of the node writes the state) or journal (the last snapshot and the journal are replayed into a second state).",
        discussion: "fork takes less than half the CPU and no second copy of the state: the two processes share its memory, and the kernel copies the pages the node writes meanwhile. Requests wait for the fork itself (about 30 ms at 10M devices). Until the child has read the claim index, the node keeps new claims in a table of its own instead of writing the index's shared pages, so a node growing fast copies few pages; it needs memory for the claims it adds meanwhile. journal has no such pause, and needs memory for twice the state. Where the kernel refuses the fork (vm.overcommit_memory=2 without room), the node builds that snapshot the journal's way and logs a warning. docs/performance.md has the figures."
    ) { text, configuration throws(SettingValueError) in
        switch text {
        case "fork": configuration.snapshotsByFork = true
        case "journal": configuration.snapshotsByFork = false
        default: throw SettingValueError("snapshot-by \(text.debugDescription) is not fork or journal")
        }
    }

    static let erasureWithin = NodeSetting(
        flag: "erasure-within", environment: "REGISTRY_ERASURE_WITHIN", fileKey: "erasureWithin", fileType: .wholeNumber,
        defaultText: "86400",
        help: "Seconds within which a forgotten device's bytes leave this node's snapshots and journal files (0...31536000; 0: only as ordinary snapshots take them).",
        discussion: "Half this time after a forget, once it is durable, the node goes on in a new journal file and takes an erasure snapshot that it keeps alone, so that no kept snapshot holds the forgotten records and the journal files before it can be trimmed. Trimming also waits until every member holds those files: a member that is down holds the deadline up until it is back or removed. docs/security.md says what is gone when."
    ) { text, configuration throws(SettingValueError) in
        configuration.erasureWithinSeconds = try SettingValueError.wholeNumber(text, in: 0...31_536_000, "erasure deadline")
    }

    static let publicSuffixList = NodeSetting(
        flag: "public-suffix-list", environment: "REGISTRY_PUBLIC_SUFFIX_LIST", fileKey: "publicSuffixList", fileType: .string,
        defaultText: NodeConfiguration.debianPublicSuffixList,
        help: "The Public Suffix List that names the vendor of a bundle ID no vendor rule matches, unless the config file sets vendorDefaultDepth.",
        discussion: "Read in reverse label order: uk.co.bbc.iplayer belongs to uk.co.bbc, com.acme.mail to com.acme. A node pins the default it first served in its data directory (default-vendor.pin) and keeps it: a newer list is taken only when it would move no device the node holds; otherwise the node says how many it would move and keeps the pinned one. docs/identity.md, \"The default vendor\"."
    ) { text, configuration throws(SettingValueError) in
        guard !text.isEmpty else { throw SettingValueError("the public suffix list's path is empty") }
        configuration.publicSuffixListPath = text
    }

    static let journalFileBytes = NodeSetting(
        flag: "journal-file-bytes", environment: "REGISTRY_JOURNAL_FILE_BYTES", fileKey: "journalFileBytes", fileType: .wholeNumber,
        defaultText: "67108864",
        help: "Bytes after which the journal goes on in a new file (65536...4294967296).",
        discussion: "Trimming deletes whole files once snapshots cover them and every member holds them, so smaller files give disk back sooner; each file costs a file descriptor while a peer reads it."
    ) { text, configuration throws(SettingValueError) in
        configuration.journalFileBytes = try SettingValueError.wholeNumber(text, in: 65_536...4_294_967_296, "journal file size")
    }

    /// The setting whose flag is `flag`.
    public static func named(_ flag: String) -> NodeSetting {
        guard let setting = all.first(where: { $0.flag == flag }) else { preconditionFailure("no setting --\(flag)") }
        return setting
    }
}
