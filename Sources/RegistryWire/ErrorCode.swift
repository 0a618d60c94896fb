import RegistryCore

/// A wire error code (`registry.v1.ErrorCode`). A struct rather than an enum so that codes
/// added by newer servers survive decoding.
public struct ErrorCode: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    public static let invalidBundleID = ErrorCode(rawValue: 1)
    public static let invalidIdentifier = ErrorCode(rawValue: 2)
    public static let missingIdentifier = ErrorCode(rawValue: 3)
    public static let invalidDeviceID = ErrorCode(rawValue: 4)
    public static let notFound = ErrorCode(rawValue: 5)
    public static let batchTooLarge = ErrorCode(rawValue: 6)
    public static let unknownMessage = ErrorCode(rawValue: 7)
    public static let invalidArgument = ErrorCode(rawValue: 8)
    public static let unavailable = ErrorCode(rawValue: 9)
    public static let internalError = ErrorCode(rawValue: 10)
    public static let replicationTimeout = ErrorCode(rawValue: 11)
    public static let permissionDenied = ErrorCode(rawValue: 12)
    public static let notAMember = ErrorCode(rawValue: 13)
    public static let memberReachable = ErrorCode(rawValue: 14)
    public static let notCaughtUp = ErrorCode(rawValue: 15)
    public static let gone = ErrorCode(rawValue: 16)
    public static let cursorExpired = ErrorCode(rawValue: 17)
    public static let invalidCursor = ErrorCode(rawValue: 18)
    public static let tooManyWatchers = ErrorCode(rawValue: 19)
    public static let handshakeRequired = ErrorCode(rawValue: 100)
    public static let unsupportedVersion = ErrorCode(rawValue: 101)
    public static let malformedFrame = ErrorCode(rawValue: 102)
    public static let frameTooLarge = ErrorCode(rawValue: 103)
    public static let unsupportedRole = ErrorCode(rawValue: 104)
    public static let wrongCluster = ErrorCode(rawValue: 105)
    public static let duplicateNodeID = ErrorCode(rawValue: 106)
    public static let mintingKeyMismatch = ErrorCode(rawValue: 107)
    public static let clockSkew = ErrorCode(rawValue: 108)
    public static let invalidOperation = ErrorCode(rawValue: 109)
    public static let unexpectedPeerFrame = ErrorCode(rawValue: 110)
    public static let nodeRemoved = ErrorCode(rawValue: 111)
    public static let snapshotRefused = ErrorCode(rawValue: 112)
    public static let unauthenticated = ErrorCode(rawValue: 113)
    public static let vendorRulesMismatch = ErrorCode(rawValue: 114)
    public static let tooManyConnections = ErrorCode(rawValue: 115)

    /// Every code this version knows, in code order.
    public static let known: [ErrorCode] = [
        .invalidBundleID, .invalidIdentifier, .missingIdentifier, .invalidDeviceID, .notFound, .batchTooLarge,
        .unknownMessage, .invalidArgument, .unavailable, .internalError, .replicationTimeout, .permissionDenied, .notAMember,
        .memberReachable, .notCaughtUp, .gone, .cursorExpired, .invalidCursor, .tooManyWatchers, .handshakeRequired,
        .unsupportedVersion, .malformedFrame, .frameTooLarge, .unsupportedRole, .wrongCluster, .duplicateNodeID,
        .mintingKeyMismatch, .clockSkew, .invalidOperation, .unexpectedPeerFrame, .nodeRemoved,
        .snapshotRefused, .unauthenticated, .vendorRulesMismatch, .tooManyConnections,
    ]

    /// Codes from 100 end the connection.
    public var closesConnection: Bool { rawValue >= 100 }

    /// The stable snake-case name used in JSON output and metrics labels.
    public var name: String {
        switch self {
        case .invalidBundleID: return "invalid_bundle_id"
        case .invalidIdentifier: return "invalid_identifier"
        case .missingIdentifier: return "missing_identifier"
        case .invalidDeviceID: return "invalid_device_id"
        case .notFound: return "not_found"
        case .batchTooLarge: return "batch_too_large"
        case .unknownMessage: return "unknown_message"
        case .invalidArgument: return "invalid_argument"
        case .unavailable: return "unavailable"
        case .internalError: return "internal"
        case .replicationTimeout: return "replication_timeout"
        case .handshakeRequired: return "handshake_required"
        case .unsupportedVersion: return "unsupported_version"
        case .malformedFrame: return "malformed_frame"
        case .frameTooLarge: return "frame_too_large"
        case .unsupportedRole: return "unsupported_role"
        case .wrongCluster: return "wrong_cluster"
        case .duplicateNodeID: return "duplicate_node_id"
        case .mintingKeyMismatch: return "minting_key_mismatch"
        case .clockSkew: return "clock_skew"
        case .invalidOperation: return "invalid_operation"
        case .unexpectedPeerFrame: return "unexpected_peer_frame"
        case .nodeRemoved: return "node_removed"
        case .snapshotRefused: return "snapshot_refused"
        case .permissionDenied: return "permission_denied"
        case .notAMember: return "not_a_member"
        case .memberReachable: return "member_reachable"
        case .notCaughtUp: return "not_caught_up"
        case .gone: return "gone"
        case .cursorExpired: return "cursor_expired"
        case .invalidCursor: return "invalid_cursor"
        case .tooManyWatchers: return "too_many_watchers"
        case .unauthenticated: return "unauthenticated"
        case .vendorRulesMismatch: return "vendor_rules_mismatch"
        case .tooManyConnections: return "too_many_connections"
        default: return "code_\(rawValue)"
        }
    }

    public var description: String { name }

    public static func < (lhs: ErrorCode, rhs: ErrorCode) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A typed error as it travels: code, text, and whether retrying may help.
public struct WireError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String
    public let retryable: Bool

    public init(code: ErrorCode, message: String, retryable: Bool = false) {
        self.code = code
        self.message = message
        self.retryable = retryable
    }

    /// The wire form of an identity-rule refusal.
    public init(_ error: IdentityError) {
        switch error {
        case .invalidBundleID: code = .invalidBundleID
        case .invalidIdentifier: code = .invalidIdentifier
        case .missingIdentifier: code = .missingIdentifier
        case .invalidDeviceID: code = .invalidDeviceID
        case .invalidVendor, .invalidAccount, .invalidBindingPolicy, .invalidClonePolicy: code = .invalidArgument
        }
        message = error.description
        retryable = false
    }

    public var description: String { "\(code.name): \(message)" }
}
