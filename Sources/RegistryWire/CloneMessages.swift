import CRegistryProto

/// `registry.v1.SuspectedClone`: one suspected keychain clone with its evidence.
public struct SuspectedCloneMessage: Hashable, Sendable {
    /// Whether the vendor's policy flagged the device or split the later IDFV off.
    public enum Action: String, Hashable, Sendable {
        case flag
        case split
    }

    /// The device both IDFVs resolved to, canonical now.
    public var deviceID: String
    public var vendor: String
    public var action: Action
    /// When the later IDFV first registered (milliseconds since the Unix epoch).
    public var laterIDFVAppearedMillis: UInt64
    /// When the earlier IDFV registered again after it, and from which app.
    public var earlierIDFVSeenMillis: UInt64
    public var bundleID: String
    /// Split: the later IDFV's device, canonical now; empty for a flag.
    public var newDeviceID: String
    /// The node that decided it.
    public var decidedBy: String

    public init(
        deviceID: String, vendor: String, action: Action, laterIDFVAppearedMillis: UInt64, earlierIDFVSeenMillis: UInt64, bundleID: String,
        newDeviceID: String = "", decidedBy: String
    ) {
        self.deviceID = deviceID
        self.vendor = vendor
        self.action = action
        self.laterIDFVAppearedMillis = laterIDFVAppearedMillis
        self.earlierIDFVSeenMillis = earlierIDFVSeenMillis
        self.bundleID = bundleID
        self.newDeviceID = newDeviceID
        self.decidedBy = decidedBy
    }
}

/// Converts the clones request and answer between their Swift and protobuf-c forms.
enum CloneCodec {
    static func request(_ vendor: String, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__ClonesRequest> {
        var message = Registry__V1__ClonesRequest()
        registry__v1__clones_request__init(&message)
        message.vendor = arena.string(vendor)
        return arena.new(message)
    }

    static func clones(_ clones: [SuspectedCloneMessage], in arena: CArena) -> UnsafeMutablePointer<Registry__V1__Clones> {
        var message = Registry__V1__Clones()
        registry__v1__clones__init(&message)
        message.n_clones = clones.count
        message.clones = arena.array(clones.map { Optional(clone($0, in: arena)) })
        return arena.new(message)
    }

    private static func clone(_ clone: SuspectedCloneMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__SuspectedClone> {
        var message = Registry__V1__SuspectedClone()
        registry__v1__suspected_clone__init(&message)
        message.device_id = arena.string(clone.deviceID)
        message.vendor = arena.string(clone.vendor)
        message.action = clone.action == .split ? REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_SPLIT : REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_FLAG
        message.later_idfv_appeared_ms = clone.laterIDFVAppearedMillis
        message.earlier_idfv_seen_ms = clone.earlierIDFVSeenMillis
        message.bundle_id = arena.string(clone.bundleID)
        message.new_device_id = arena.string(clone.newDeviceID)
        message.decided_by = arena.string(clone.decidedBy)
        return arena.new(message)
    }

    static func clones(_ message: Registry__V1__Clones) throws(CodecError) -> [SuspectedCloneMessage] {
        try CRead.messages(message.n_clones, message.clones) { (item) throws(CodecError) -> SuspectedCloneMessage in
            let action: SuspectedCloneMessage.Action
            switch item.action {
            case REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_FLAG: action = .flag
            case REGISTRY__V1__CLONE_ACTION__CLONE_ACTION_SPLIT: action = .split
            default: throw .invalidField("a suspected clone's action \(item.action.rawValue) is neither FLAG nor SPLIT")
            }
            return SuspectedCloneMessage(
                deviceID: CRead.string(item.device_id), vendor: CRead.string(item.vendor), action: action,
                laterIDFVAppearedMillis: item.later_idfv_appeared_ms, earlierIDFVSeenMillis: item.earlier_idfv_seen_ms,
                bundleID: CRead.string(item.bundle_id), newDeviceID: CRead.string(item.new_device_id), decidedBy: CRead.string(item.decided_by))
        }
    }
}
