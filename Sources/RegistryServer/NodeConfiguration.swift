import Foundation
import RegistryCore
import RegistryStorage
import RegistryWire

/// A node's settings. Sources, strongest first: command-line flags, environment variables,
/// the JSON config file, then these defaults.
public struct NodeConfiguration: Equatable, Sendable {
    public var host = "127.0.0.1"
    public var port = 7400
    public var dataDirectory = "./data"
    /// Nil: use the ID stored in the data directory, or generate one for a new directory.
    public var nodeID: NodeID?
    public var clusterID = "default"
    public var limits = Limits.default
    public var vendorRules: VendorRules
    /// How long a graceful shutdown waits for in-flight requests before closing connections.
    public var drainTimeoutSeconds = 10.0
    /// Event-loop threads serving connections; nil means one per CPU core.
    public var eventLoopThreads: Int?
    /// Devices the in-memory indexes are sized for at start-up; 0 lets them start small and
    /// grow. An index that grows allocates a table twice the size, waits for the kernel to
    /// provide its pages, then moves its entries over while it serves: CPU time, and a latency
    /// tail, that a node sized for its devices never pays. The tables take 96 to 192 bytes per
    /// expected device from the start.
    public var expectedDevices = 0
    /// How long the log writer, busy back to back, waits for more operations before a commit
    /// that would carry few (see ``CommitPacing``); a delay of 0 commits at once.
    public var commitPacing = CommitPacing.default
    /// The highest commit rate, in operations a second over the last second, at which the node
    /// moves finished journal files into its SQLite log while it serves (see ``JournalMover``);
    /// 0 leaves them all for the next start-up.
    public var moveJournalBelowOperationsPerSecond = JournalMovePolicy.defaultQuietOperationsPerSecond
    /// Spare journal files the node keeps (see ``SpareJournalMaker``): files whose blocks are
    /// already written, so that a rotation writes over them instead of making a spare of zeros
    /// while the node is busy. Retired files refill them, and a quiet node makes the ones missing.
    /// Each takes a journal file's disk space (64 MiB).
    public var journalSpares = 1
    /// The most ``journalSpares`` may be.
    public static let maxJournalSpares = 4_096
    /// Bytes after which a journal file rotates: ``CommitJournal/rotationBytes``, smaller only in
    /// tests that need many files.
    var journalFileBytes = CommitJournal.rotationBytes
    /// The most ``moveJournalBelowOperationsPerSecond`` may be.
    public static let maxMoveJournalBelow = 10_000_000

    public init() {
        vendorRules = try! VendorRules()
    }

    /// The JSON config file's shape (see deploy/registryd.json). Every key is optional.
    struct File: Decodable {
        struct Rule: Decodable {
            var name: String?
            var prefixes: [String]
        }

        var host: String?
        var port: Int?
        var dataDir: String?
        var nodeId: String?
        var clusterId: String?
        var maxFrameBytes: UInt32?
        var maxBatchSize: UInt32?
        var maxInFlight: UInt32?
        var drainTimeoutSeconds: Double?
        var eventLoopThreads: Int?
        var expectedDevices: Int?
        var commitDelayMicros: Int?
        var moveJournalBelow: Int?
        var journalSpares: Int?
        var vendorDefaultDepth: Int?
        var vendors: [Rule]?
    }

    /// Applies a config file on top of `self`.
    public mutating func apply(configFile path: String) throws(ConfigurationError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        let file: File
        do {
            let decoder = JSONDecoder()
            decoder.allowsJSON5 = false
            file = try decoder.decode(File.self, from: data)
        } catch let error as DecodingError {
            throw .invalid(path: path, reason: Self.describe(error))
        } catch {
            throw .invalid(path: path, reason: "\(error)")
        }
        if let host = file.host { self.host = host }
        if let port = file.port { try setPort(port, source: "\(path): port") }
        if let dataDir = file.dataDir { dataDirectory = dataDir }
        if let nodeId = file.nodeId { try setNodeID(nodeId, source: "\(path): nodeId") }
        if let clusterId = file.clusterId { self.clusterID = clusterId }
        if let value = file.maxFrameBytes { limits.maxFrameBytes = value }
        if let value = file.maxBatchSize { limits.maxBatchSize = value }
        if let value = file.maxInFlight { limits.maxInFlight = value }
        if let value = file.drainTimeoutSeconds { drainTimeoutSeconds = value }
        if let value = file.eventLoopThreads { try setEventLoopThreads(value, source: "\(path): eventLoopThreads") }
        if let value = file.expectedDevices { try setExpectedDevices(value, source: "\(path): expectedDevices") }
        if let value = file.commitDelayMicros { try setCommitDelayMicros(value, source: "\(path): commitDelayMicros") }
        if let value = file.moveJournalBelow { try setMoveJournalBelow(value, source: "\(path): moveJournalBelow") }
        if let value = file.journalSpares { try setJournalSpares(value, source: "\(path): journalSpares") }
        if file.vendors != nil || file.vendorDefaultDepth != nil {
            do {
                let rules = try (file.vendors ?? []).map { (rule) throws(IdentityError) -> VendorRule in
                    try VendorRule(name: rule.name, prefixes: rule.prefixes)
                }
                vendorRules = try VendorRules(rules: rules, defaultDepth: file.vendorDefaultDepth ?? 2)
            } catch {
                throw .invalid(path: path, reason: "vendors: \(error)")
            }
        }
        try validate(source: path)
    }

    public mutating func setEventLoopThreads(_ count: Int, source: String) throws(ConfigurationError) {
        guard (1...256).contains(count) else {
            throw .invalidValue(source: source, reason: "event-loop threads \(count) is not 1...256")
        }
        eventLoopThreads = count
    }

    public mutating func setExpectedDevices(_ devices: Int, source: String) throws(ConfigurationError) {
        guard (0...RegistryState.maxExpectedDevices).contains(devices) else {
            throw .invalidValue(source: source, reason: "expected devices \(devices) is not 0...\(RegistryState.maxExpectedDevices)")
        }
        expectedDevices = devices
    }

    public mutating func setCommitDelayMicros(_ micros: Int, source: String) throws(ConfigurationError) {
        guard (0...Int(CommitPacing.maxDelayMicros)).contains(micros) else {
            throw .invalidValue(source: source, reason: "commit delay \(micros) µs is not 0...\(CommitPacing.maxDelayMicros)")
        }
        commitPacing.delayMicros = UInt32(micros)
    }

    public mutating func setMoveJournalBelow(_ operationsPerSecond: Int, source: String) throws(ConfigurationError) {
        guard (0...Self.maxMoveJournalBelow).contains(operationsPerSecond) else {
            throw .invalidValue(
                source: source, reason: "journal-moving rate \(operationsPerSecond) operations/s is not 0...\(Self.maxMoveJournalBelow)")
        }
        moveJournalBelowOperationsPerSecond = operationsPerSecond
    }

    public mutating func setJournalSpares(_ files: Int, source: String) throws(ConfigurationError) {
        guard (1...Self.maxJournalSpares).contains(files) else {
            throw .invalidValue(source: source, reason: "journal spares \(files) is not 1...\(Self.maxJournalSpares)")
        }
        journalSpares = files
    }

    public mutating func setPort(_ port: Int, source: String) throws(ConfigurationError) {
        guard (0...65_535).contains(port) else { throw .invalidValue(source: source, reason: "port \(port) is not 0...65535") }
        self.port = port
    }

    public mutating func setNodeID(_ text: String, source: String) throws(ConfigurationError) {
        do {
            nodeID = try NodeID(text)
        } catch {
            throw .invalidValue(source: source, reason: error.description)
        }
    }

    /// Checks limits that every source must respect.
    public func validate(source: String) throws(ConfigurationError) {
        guard limits.maxFrameBytes >= 64, limits.maxFrameBytes <= 64 << 20 else {
            throw .invalidValue(source: source, reason: "maxFrameBytes must be 64 bytes to 64 MiB")
        }
        guard limits.maxBatchSize >= 1 else { throw .invalidValue(source: source, reason: "maxBatchSize must be at least 1") }
        guard limits.maxInFlight >= 1 else { throw .invalidValue(source: source, reason: "maxInFlight must be at least 1") }
        guard drainTimeoutSeconds >= 0 else { throw .invalidValue(source: source, reason: "drainTimeoutSeconds must be >= 0") }
        guard !clusterID.isEmpty else { throw .invalidValue(source: source, reason: "clusterId must not be empty") }
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            return "not valid JSON: \(context.debugDescription)"
        case .keyNotFound(let key, let context):
            return "missing key \(path(context.codingPath + [key]))"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            return "\(path(context.codingPath)) should be \(type)"
        @unknown default:
            return "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
}

/// Why the configuration could not be used. registryd prints it and exits with status 78.
public enum ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(path: String, reason: String)
    case invalidValue(source: String, reason: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "cannot read config file \(path): \(reason)"
        case .invalid(let path, let reason): return "config file \(path) is invalid: \(reason)"
        case .invalidValue(let source, let reason): return "\(source): \(reason)"
        }
    }
}
