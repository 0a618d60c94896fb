import RegistryCore

/// Swift forms of the `registry.v1` messages. Fields carry what the client sent, unvalidated:
/// validation is the identity rules' job, so that every refusal gets its own typed error.

/// `registry.v1.ProtocolVersion`.
public struct ProtocolVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: UInt32
    public var minor: UInt32

    public init(major: UInt32, minor: UInt32) {
        self.major = major
        self.minor = minor
    }

    /// The version this code speaks.
    public static let current = ProtocolVersion(major: 1, minor: 2)

    /// The first version whose nodes carry out vendor moves (`VendorRuleChange.moved`): a node
    /// before it applies a moving change without its move, so a move waits for every member to
    /// run it (``PeerWelcome/version``).
    public static let vendorMoves = ProtocolVersion(major: 1, minor: 1)

    /// The first version whose nodes read clone operations (`CloneMark`): a node before it
    /// refuses a batch that holds one, and every later operation of that log with it, so a node
    /// logs one only while every member runs this version or later.
    public static let clones = ProtocolVersion(major: 1, minor: 2)

    /// True when `self` is `other` or later.
    public func isAtLeast(_ other: ProtocolVersion) -> Bool {
        (major, minor) >= (other.major, other.minor)
    }

    public var description: String { "\(major).\(minor)" }
}

/// `registry.v1.Role`; `unknown` keeps values this version does not know.
public enum Role: Hashable, Sendable, CustomStringConvertible {
    case client, admin, peer
    case unknown(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 1: self = .client
        case 2: self = .admin
        case 3: self = .peer
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .client: return 1
        case .admin: return 2
        case .peer: return 3
        case .unknown(let value): return value
        }
    }

    public var description: String {
        switch self {
        case .client: return "client"
        case .admin: return "admin"
        case .peer: return "peer"
        case .unknown(let value): return "unknown(\(value))"
        }
    }
}

/// `registry.v1.Hello`.
public struct Hello: Hashable, Sendable {
    public var version: ProtocolVersion
    public var role: Role
    public var clientName: String
    /// The client token (docs/security.md); empty: none.
    public var token: String

    public init(version: ProtocolVersion = .current, role: Role, clientName: String, token: String = "") {
        self.version = version
        self.role = role
        self.clientName = clientName
        self.token = token
    }
}

/// `registry.v1.Limits`.
public struct Limits: Hashable, Sendable {
    public var maxFrameBytes: UInt32
    public var maxBatchSize: UInt32
    public var maxInFlight: UInt32
    /// How often, at least, a watch stream hears from the node (`--watch-progress`); 0 when the
    /// node does not say.
    public var watchProgressMillis: UInt32

    public init(maxFrameBytes: UInt32, maxBatchSize: UInt32, maxInFlight: UInt32, watchProgressMillis: UInt32 = 0) {
        self.maxFrameBytes = maxFrameBytes
        self.maxBatchSize = maxBatchSize
        self.maxInFlight = maxInFlight
        self.watchProgressMillis = watchProgressMillis
    }

    /// 1 MiB frames, 1000 registrations a batch, 1024 requests in flight per connection.
    public static let `default` = Limits(maxFrameBytes: 1 << 20, maxBatchSize: 1000, maxInFlight: 1024)
}

/// `registry.v1.HelloAccepted`.
public struct HelloAccepted: Hashable, Sendable {
    public var version: ProtocolVersion
    public var nodeID: String
    public var clusterID: String
    public var serverVersion: String
    public var limits: Limits
    /// Drawn at random when the node starts: a node that dials its own address recognises itself.
    public var instanceID: UInt64
    /// Drawn for this connection; a peer signs it to prove the cluster secret.
    public var challenge: UInt64

    public init(
        version: ProtocolVersion, nodeID: String, clusterID: String, serverVersion: String, limits: Limits, instanceID: UInt64 = 0,
        challenge: UInt64 = 0
    ) {
        self.challenge = challenge
        self.version = version
        self.nodeID = nodeID
        self.clusterID = clusterID
        self.serverVersion = serverVersion
        self.limits = limits
        self.instanceID = instanceID
    }
}

/// `registry.v1.RegisterRequest`.
public struct RegisterRequest: Hashable, Sendable {
    public var bundleID: String
    public var identifiers: [PresentedIdentifier]

    public init(bundleID: String, identifiers: [PresentedIdentifier]) {
        self.bundleID = bundleID
        self.identifiers = identifiers
    }

    /// Convenience for the common two kinds.
    public init(bundleID: String, keychain: String? = nil, idfv: String? = nil) {
        var identifiers = [PresentedIdentifier]()
        if let keychain { identifiers.append(PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, text: keychain)) }
        if let idfv { identifiers.append(PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, text: idfv)) }
        self.init(bundleID: bundleID, identifiers: identifiers)
    }
}

/// `registry.v1.RegisterResult`.
public struct RegisterResult: Hashable, Sendable {
    /// The device ID's text, held as a UUID when the node made the result (see ``UUIDText``).
    public var deviceIDText: UUIDText
    public var created: Bool
    public var vendor: String
    public var replacedDeviceIDs: [String]
    public var rejectedIdentifiers: [PresentedIdentifier]

    public init(
        deviceID: String, created: Bool, vendor: String, replacedDeviceIDs: [String] = [],
        rejectedIdentifiers: [PresentedIdentifier] = []
    ) {
        self.init(
            deviceIDText: UUIDText(deviceID), created: created, vendor: vendor, replacedDeviceIDs: replacedDeviceIDs,
            rejectedIdentifiers: rejectedIdentifiers)
    }

    public init(
        deviceIDText: UUIDText, created: Bool, vendor: String, replacedDeviceIDs: [String] = [],
        rejectedIdentifiers: [PresentedIdentifier] = []
    ) {
        self.deviceIDText = deviceIDText
        self.created = created
        self.vendor = vendor
        self.replacedDeviceIDs = replacedDeviceIDs
        self.rejectedIdentifiers = rejectedIdentifiers
    }

    /// The device ID's text.
    public var deviceID: String {
        get { deviceIDText.text }
        set { deviceIDText = UUIDText(newValue) }
    }
}

/// `registry.v1.LookupRequest`: an identifier within a vendor, named directly or by a bundle.
public struct LookupRequest: Hashable, Sendable {
    public enum Scope: Hashable, Sendable {
        case bundle(String)
        case vendor(String)
        case unspecified
    }

    public var scope: Scope
    /// Nil when the client sent none.
    public var identifier: PresentedIdentifier?

    public init(scope: Scope, identifier: PresentedIdentifier?) {
        self.scope = scope
        self.identifier = identifier
    }
}

/// `registry.v1.AppSeen`.
public struct AppSeenRecord: Hashable, Sendable, Codable {
    public var bundleID: String
    public var firstSeenMillis: UInt64
    public var lastSeenMillis: UInt64

    public init(bundleID: String, firstSeenMillis: UInt64, lastSeenMillis: UInt64) {
        self.bundleID = bundleID
        self.firstSeenMillis = firstSeenMillis
        self.lastSeenMillis = lastSeenMillis
    }
}

/// `registry.v1.DeviceRecord`.
public struct DeviceRecordMessage: Hashable, Sendable {
    public var deviceID: String
    public var vendor: String
    public var apps: [AppSeenRecord]
    public var aliasIDs: [String]
    public var createdAtMillis: UInt64
    public var createdHLC: UInt64
    public var originNodeID: String

    public init(
        deviceID: String, vendor: String, apps: [AppSeenRecord], aliasIDs: [String], createdAtMillis: UInt64,
        createdHLC: UInt64, originNodeID: String
    ) {
        self.deviceID = deviceID
        self.vendor = vendor
        self.apps = apps
        self.aliasIDs = aliasIDs
        self.createdAtMillis = createdAtMillis
        self.createdHLC = createdHLC
        self.originNodeID = originNodeID
    }

    /// The wire form of a core record.
    public init(_ record: DeviceRecord) {
        self.init(
            deviceID: record.device.id.description, vendor: record.device.vendor.name,
            apps: record.apps.map {
                AppSeenRecord(bundleID: $0.bundle.value, firstSeenMillis: $0.firstSeen.millis, lastSeenMillis: $0.lastSeen.millis)
            },
            aliasIDs: record.aliases.map(\.description), createdAtMillis: record.device.created.millis,
            createdHLC: record.device.created.rawValue, originNodeID: record.device.origin.value)
    }
}

/// `registry.v1.LogPosition`: a log of the cluster, (origin node, epoch), and a sequence in it.
public struct LogPosition: Hashable, Sendable, Codable {
    public var origin: String
    public var epoch: UInt64
    public var sequence: UInt64

    public init(origin: String, epoch: UInt64, sequence: UInt64) {
        self.origin = origin
        self.epoch = epoch
        self.sequence = sequence
    }
}

/// `registry.v1.SnapshotTaken`.
public struct SnapshotTaken: Hashable, Sendable {
    public var operations: UInt64
    public var bytes: UInt64
    public var durationMillis: UInt64
    public var journalFilesRemoved: UInt64

    public init(operations: UInt64, bytes: UInt64, durationMillis: UInt64, journalFilesRemoved: UInt64) {
        self.operations = operations
        self.bytes = bytes
        self.durationMillis = durationMillis
        self.journalFilesRemoved = journalFilesRemoved
    }
}

/// `registry.v1.Stats`.
public struct StatsMessage: Hashable, Sendable {
    public var nodeID = ""
    public var clusterID = ""
    public var serverVersion = ""
    public var uptimeMillis: UInt64 = 0
    public var deviceCount: UInt64 = 0
    public var aliasCount: UInt64 = 0
    public var claimCount: UInt64 = 0
    public var requestsServed: UInt64 = 0
    /// Non-zero counts only, in code order.
    public var errors: [ErrorCode: UInt64] = [:]
    public var logOperations: UInt64 = 0
    public var logEpoch: UInt64 = 0
    public var logSequence: UInt64 = 0
    public var connections: UInt64 = 0
    /// Durable log commits since start.
    public var logCommits: UInt64 = 0
    /// How long those commits took (journal write and fdatasync), since start.
    public var commitLatency = LatencyBuckets()
    /// Bytes of journal kept on disk (the log the snapshots do not yet let go).
    public var journalBytes: UInt64 = 0
    /// Journal files holding them.
    public var journalFiles: UInt64 = 0
    /// Operations the newest snapshot covers (0: none yet).
    public var snapshotOperations: UInt64 = 0
    /// Milliseconds since the last snapshot this run took, or since start-up.
    public var snapshotAgeMillis: UInt64 = 0
    /// The size of the last snapshot this run took (0: none yet).
    public var snapshotBytes: UInt64 = 0
    /// The node's version vector, ordered by origin, then epoch.
    public var versionVector: [LogPosition] = []
    /// This node's links to its peers.
    public var peers: [PeerLinkReport] = []
    /// The cluster's members.
    public var members: [ClusterMemberReport] = []
    /// The order-independent digest of the node's canonical state, taken with ``versionVector``:
    /// equal vectors with different digests mean two nodes have diverged.
    public var stateDigest: UInt64 = 0
    /// Why the node refuses writes now; empty while it takes them.
    public var writeRefusal = ""

    public init() {}

    /// `errors` keyed by code name, as reports print them.
    public var errorsByName: [String: UInt64] {
        Dictionary(uniqueKeysWithValues: errors.map { ($0.key.name, $0.value) })
    }
}

/// One registration's outcome inside a batch.
public enum BatchItem: Hashable, Sendable {
    case result(RegisterResult)
    case error(WireError)
}

/// What a client can ask.
public enum ClientBody: Hashable, Sendable {
    case hello(Hello)
    case register(RegisterRequest)
    case registerBatch([RegisterRequest])
    case resolve(deviceID: String)
    case lookup(LookupRequest)
    case stats
    /// Take a snapshot now.
    case snapshot
    /// Removes a member for good (admin).
    case removeMember(nodeID: String, force: Bool = false)
    /// Binds an account to a device (a write).
    case bind(BindingRequest)
    /// Unbinds an account from a device (a write).
    case unbind(BindingRequest)
    /// An account's devices, or a device's accounts.
    case account(AccountQuery)
    /// Erases a device (a write): the device ID text as sent.
    case forget(deviceID: String)
    /// Lists or changes the cluster's vendor rules (a change is a write).
    case vendor(VendorRequestMessage)
    /// Streams ``ServerBody/watchEvents(_:)`` until the connection closes (`watch.proto`).
    case watch(WatchRequestMessage)
    /// The suspected keychain clones of a vendor (a name or a bundle ID), or of every vendor the
    /// caller reaches (empty).
    case clones(vendor: String)
    /// A body this version does not know (or none at all).
    case unknown
}

/// `registry.v1.ClientFrame`.
public struct ClientFrame: Hashable, Sendable {
    public var requestID: UInt64
    public var body: ClientBody
    /// For registrations: how many peers must hold the write before the answer; nil is the
    /// node's default (`--ack-replicas`).
    public var ackReplicas: UInt32?
    /// Answer only once the node holds what this token names (read your writes across nodes).
    public var after: CausalToken

    public init(requestID: UInt64, body: ClientBody, ackReplicas: UInt32? = nil, after: CausalToken = .empty) {
        self.requestID = requestID
        self.body = body
        self.ackReplicas = ackReplicas
        self.after = after
    }
}

/// What a server can answer.
public enum ServerBody: Hashable, Sendable {
    case helloAccepted(HelloAccepted)
    case registerResult(RegisterResult)
    case registerBatchResult([BatchItem])
    case device(DeviceRecordMessage)
    case stats(StatsMessage)
    case snapshotTaken(SnapshotTaken)
    case memberRemoved(nodeID: String)
    case bindResult(BindResultMessage)
    case accounts([AccountBindingsMessage])
    case forgetResult(ForgetResultMessage)
    case vendorRules(VendorRulesMessage)
    /// A watch's stream.
    case watchEvents(WatchEventsMessage)
    case clones([SuspectedCloneMessage])
    case error(WireError)
    case unknown
}

/// `registry.v1.ServerFrame`.
public struct ServerFrame: Hashable, Sendable {
    public var requestID: UInt64
    public var body: ServerBody
    /// What the answer reflects; empty for answers that are not about the registry's content.
    public var token: CausalToken

    public init(requestID: UInt64, body: ServerBody, token: CausalToken = .empty) {
        self.requestID = requestID
        self.body = body
        self.token = token
    }
}

/// `registry.v1.PeerLinkStatus`: one link from a node to a peer.
public struct PeerLinkReport: Hashable, Sendable, Codable {
    public var address: String
    public var nodeID: String
    public var state: String
    public var backlogOperations: UInt64
    public var inFlightBatches: UInt64
    public var lagMillis: UInt64
    public var peerHolds: [LogPosition]
    public var reconnects: UInt64
    public var lastError: String
    public var sentOperations: UInt64

    public init(
        address: String, nodeID: String, state: String, backlogOperations: UInt64, inFlightBatches: UInt64, lagMillis: UInt64,
        peerHolds: [LogPosition], reconnects: UInt64, lastError: String, sentOperations: UInt64
    ) {
        self.address = address
        self.nodeID = nodeID
        self.state = state
        self.backlogOperations = backlogOperations
        self.inFlightBatches = inFlightBatches
        self.lagMillis = lagMillis
        self.peerHolds = peerHolds
        self.reconnects = reconnects
        self.lastError = lastError
        self.sentOperations = sentOperations
    }
}

/// `registry.v1.ClusterMember`.
public struct ClusterMemberReport: Hashable, Sendable, Codable {
    public var nodeID: String
    public var address: String
    public var removed: Bool

    public init(nodeID: String, address: String, removed: Bool) {
        self.nodeID = nodeID
        self.address = address
        self.removed = removed
    }
}
