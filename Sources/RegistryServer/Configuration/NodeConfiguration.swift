import Foundation
import RegistryCore
import RegistryStorage
import RegistryWire

/// A node's settings. Sources, strongest first: command-line flags, environment variables,
/// the JSON config file, then these defaults (see ``NodeSetting/all`` and
/// ``resolve(flags:environment:)``).
public struct NodeConfiguration: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port = 7400
    public var dataDirectory = "./data"
    /// Nil: use the ID stored in the data directory, or generate one for a new directory.
    public var nodeID: NodeID?
    public var clusterID = "default"
    /// The other nodes (``NodeSetting/peers``).
    public var peers: [PeerAddress] = []
    /// Where peers reach this node (``NodeSetting/advertise``); nil: where it listens.
    public var advertise: String?
    /// Derives the minting, identifier and peer keys (``NodeSetting/clusterSecret``); nil: a
    /// single node's own random secret, kept in its data directory (``ClusterSecret``).
    public var clusterSecret: String?
    /// Signs and verifies client tokens (``NodeSetting/tokenSecret``); nil: no tokens, every
    /// connection may do everything.
    public var tokenSecret: String?
    /// Listen beyond loopback without TLS and tokens (``NodeSetting/insecure``).
    public var insecure = false
    /// PEM files of TLS (``NodeSetting/tlsCert``, ``NodeSetting/tlsKey``, ``NodeSetting/tlsCA``);
    /// nil certificate: TLS off.
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var tlsCA: String?
    /// The HTTP port of `/metrics`, `/healthz` and `/readyz` (``NodeSetting/metricsPort``); nil:
    /// none.
    public var metricsPort: Int?
    /// Log lines as text for people or as one JSON object a line (``NodeSetting/logFormat``).
    public var logFormat = LogFormat.text
    /// How far ahead of this node's clock a peer's timestamp may be.
    public var maxClockSkewMillis: UInt64 = 60_000
    /// Peers a write must reach before its answer (``NodeSetting/ackReplicas``).
    public var ackReplicas = 0
    /// How long a write waits for them (``NodeSetting/replicaTimeout``).
    public var replicaTimeoutMillis: UInt64 = 5_000
    /// How long a request waits for what its causal token names (``NodeSetting/causalTimeout``).
    public var causalTimeoutMillis: UInt64 = 2_000
    /// Connections held at once (``NodeSetting/maxConnections``).
    public var maxConnections = 10_000
    /// Watch streams served at once (``NodeSetting/maxWatchers``).
    public var maxWatchers = 1_000
    /// Events kept for watchers (``NodeSetting/watchHistory``).
    public var watchHistory = 1_000_000
    /// Idle time before a watcher gets a progress event (``NodeSetting/watchProgress``).
    public var watchProgressMillis: UInt64 = 1_000
    public var limits = Limits.default
    /// The vendor rules a new cluster is seeded with, and the default vendor scope of a bundle
    /// no rule matches. ``init()`` starts from no rule and the first two labels; ``resolve(flags:environment:)``
    /// reads the Public Suffix List (``publicSuffixListPath``) unless the config file sets
    /// `vendorDefaultDepth`. The scope a node serves is pinned in its data directory
    /// (``DefaultScopePin``).
    public var vendorRules: VendorRules
    /// Where the Public Suffix List is read from (``NodeSetting/publicSuffixList``).
    public var publicSuffixListPath = NodeConfiguration.debianPublicSuffixList
    /// Debian's `publicsuffix` package's list.
    public static let debianPublicSuffixList = "/usr/share/publicsuffix/public_suffix_list.dat"
    /// How long a graceful shutdown waits for in-flight requests before closing connections.
    public var drainTimeoutSeconds = 10.0
    /// Event-loop threads serving connections; nil means one per CPU core.
    public var eventLoopThreads: Int?
    /// Devices the in-memory indexes are sized for at start-up; 0 lets them start small and
    /// grow. An index that grows allocates a table twice the size, waits for the kernel to
    /// provide its pages, then moves its entries over while it serves: CPU time, and a latency
    /// tail, that a node sized for its devices never pays. The tables take 80 bytes per
    /// expected device from the start.
    public var expectedDevices = 0
    /// Whether a grown index gives its old table back to the kernel a piece at a time
    /// (``NodeSetting/releaseTablesGradually``, ``GradualRelease``) rather than at once.
    public var releaseTablesGradually = false
    /// How long the log writer, busy back to back, waits for more operations before a commit
    /// that would carry few (see ``CommitPacing``); a delay of 0 commits at once.
    public var commitPacing = CommitPacing.default
    /// A snapshot is taken once this many operations were logged since the last (0: not by
    /// count), or ``snapshotEverySeconds`` passed with anything logged (0: not by time).
    public var snapshotEveryOperations = 1_000_000
    public var snapshotEverySeconds = 3_600
    /// How background snapshots are taken (``NodeSetting/snapshotBy``): by a forked copy of the
    /// node (true), or rebuilt from the last snapshot and the journal in a second state (false).
    public var snapshotsByFork = true
    /// Seconds within which a forgotten device's bytes leave this node's snapshots and journal
    /// files (``ErasureSchedule``); 0: only as ordinary snapshots and trimming take them.
    public var erasureWithinSeconds = 86_400
    /// Bytes after which a journal file rotates (``CommitJournal/rotationBytes`` by default).
    public var journalFileBytes = CommitJournal.rotationBytes

    public init() {
        vendorRules = try! VendorRules()
    }

    /// The log level's name (`--log-level`).
    public var logLevel = "info"
    /// The log levels, least severe first.
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    /// Config-file keys that are no setting's: the vendor rules.
    static let fileOnlyKeys = ["vendors", "vendorDefaultDepth"]

    /// The configuration from, for each setting in ``NodeSetting/all``, strongest first: its
    /// flag's value in `flags` (keyed by the flag without dashes), its environment variable, the
    /// config file (`flags["config"]`, else `REGISTRY_CONFIG`), else its default.
    public static func resolve(flags: [String: String], environment: [String: String]) throws(ConfigurationError) -> NodeConfiguration {
        var configuration = NodeConfiguration()
        var file: ConfigFile?
        var listSource: String?
        if let path = flags["config"] ?? environment["REGISTRY_CONFIG"] {
            file = try ConfigFile(path: path)
            if let rules = file?.vendorRules { configuration.vendorRules = rules }
        }
        for setting in NodeSetting.all {
            let given: (text: String, source: String)?
            if let text = flags[setting.flag] {
                given = (text, "--\(setting.flag)")
            } else if let name = setting.environment, let text = environment[name] {
                given = (text, name)
            } else if let file, let text = file.values[setting.flag] {
                given = (text, "\(file.path): \(setting.fileKey)")
            } else {
                given = nil
            }
            guard let given else { continue }
            if setting.flag == NodeSetting.publicSuffixList.flag { listSource = given.source }
            do {
                try setting.apply(given.text, &configuration)
            } catch {
                throw .invalidValue(source: given.source, reason: error.reason)
            }
        }
        if !(file?.givesDefaultDepth ?? false) { try configuration.readPublicSuffixList(source: listSource) }
        try configuration.refuseUnsafeExposure()
        try configuration.refuseSecretlessCluster()
        try configuration.refuseUnreachableAdvertise()
        return configuration
    }

    /// Makes the Public Suffix List at ``publicSuffixListPath`` the default vendor scope.
    /// `source` names where the path came from (a flag, a variable, a file's key) for an error;
    /// nil: the default.
    public mutating func readPublicSuffixList(source: String? = nil) throws(ConfigurationError) {
        let path = publicSuffixListPath
        let source = source ?? "--\(NodeSetting.publicSuffixList.flag) (default)"
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .invalidValue(
                source: source,
                reason: "cannot read the public suffix list \(path) (\(error.localizedDescription)): install Debian's publicsuffix package, point --\(NodeSetting.publicSuffixList.flag) at a copy, or set vendorDefaultDepth in the config file")
        }
        do {
            vendorRules = try vendorRules.with(defaultScope: .publicSuffix(try PublicSuffixList(parsing: text)))
        } catch {
            throw .invalidValue(source: source, reason: "\(path): \(error)")
        }
    }

    /// Whether `host` names this machine's loopback interface only.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// A node reachable beyond this machine must not let anyone who reaches its port register and
    /// read every vendor's devices, nor send tokens and identifiers in the clear: listening beyond
    /// loopback takes TLS and tokens, or `--insecure`.
    func refuseUnsafeExposure() throws(ConfigurationError) {
        guard !Self.isLoopback(host), !insecure else { return }
        var missing = [String]()
        if tlsCertificate == nil { missing.append("no TLS (--tls-cert, --tls-key, --tls-ca)") }
        if tokenSecret == nil { missing.append("no tokens (--token-secret)") }
        guard !missing.isEmpty else { return }
        throw .unsafeExposure(
            "listening on \(host) with \(missing.joined(separator: " and ")) would serve anyone who reaches it"
                + (tlsCertificate == nil ? ", in the clear" : "") + "; listen on 127.0.0.1, or pass --insecure to accept that")
    }

    /// Members of a cluster prove one shared secret to each other and key identifiers and device
    /// IDs by it; a node that names peers must be given it, since a secret it made up alone could
    /// prove nothing to them.
    func refuseSecretlessCluster() throws(ConfigurationError) {
        guard !peers.isEmpty, clusterSecret == nil else { return }
        throw .clusterSecretRequired
    }

    /// Whether `host` listens on every interface, which names no address to reach the node at.
    public static func isWildcard(_ host: String) -> Bool {
        ["0.0.0.0", "::", "[::]", "*", ""].contains(host)
    }

    /// A node with peers records in the membership where they reach it: by default where it
    /// listens, which for a wildcard host is no address (peers would dial themselves).
    func refuseUnreachableAdvertise() throws(ConfigurationError) {
        guard !peers.isEmpty, advertise == nil, Self.isWildcard(host) else { return }
        throw .advertiseRequired(host)
    }

    /// Applies a config file on top of `self` (its settings and vendor rules only), and reads the
    /// Public Suffix List unless the file sets `vendorDefaultDepth`.
    public mutating func apply(configFile path: String) throws(ConfigurationError) {
        let file = try ConfigFile(path: path)
        if let rules = file.vendorRules { vendorRules = rules }
        for setting in NodeSetting.all {
            guard let text = file.values[setting.flag] else { continue }
            do {
                try setting.apply(text, &self)
            } catch {
                throw .invalidValue(source: "\(path): \(setting.fileKey)", reason: error.reason)
            }
        }
        if !file.givesDefaultDepth {
            try readPublicSuffixList(source: file.values[NodeSetting.publicSuffixList.flag] == nil ? nil : "\(path): \(NodeSetting.publicSuffixList.fileKey)")
        }
    }
}

/// Why the configuration could not be used. registryd prints it and exits with status 78.
public enum ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(path: String, reason: String)
    /// A config-file key no setting has, with the known key it most likely meant.
    case unknownKey(path: String, key: String, nearest: String?)
    /// A value that breaks its setting's rule; `source` is the flag, variable or file key.
    case invalidValue(source: String, reason: String)
    /// Settings that together would expose the node (``NodeConfiguration/refuseUnsafeExposure()``).
    case unsafeExposure(String)
    /// Peers named without a cluster secret (``NodeConfiguration/refuseSecretlessCluster()``).
    case clusterSecretRequired
    /// Peers named while listening on a wildcard host with no --advertise.
    case advertiseRequired(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "cannot read config file \(path): \(reason)"
        case .invalid(let path, let reason): return "config file \(path) is invalid: \(reason)"
        case .unknownKey(let path, let key, let nearest):
            let hint = nearest.map { "; did you mean \"\($0)\"?" } ?? "; docs/operations.md lists every key"
            return "config file \(path) is invalid: unknown key \"\(key)\"\(hint)"
        case .invalidValue(let source, let reason): return "\(source): \(reason)"
        case .unsafeExposure(let reason): return reason
        case .advertiseRequired(let host):
            return
                "--peers with --host \(host) needs --advertise host:port (or REGISTRY_ADVERTISE): \(host) is no address the other nodes can reach this one at, and a peer that dialled it would reach itself"
        case .clusterSecretRequired:
            return
                "--peers needs --cluster-secret (or REGISTRY_CLUSTER_SECRET): every member of a cluster must hold the same random secret, for example one made with `openssl rand -hex 32`"
        }
    }
}

/// How a node writes its log lines.
public enum LogFormat: String, CaseIterable, Equatable, Sendable {
    /// `timestamp level label: message key=value`, for people.
    case text
    /// One JSON object a line (`ts`, `level`, `label`, `message`, then the metadata), for log
    /// collectors.
    case json
}
