import CRegistryProto

/// `registry.v1.ForgetResult`: what a forget erased.
public struct ForgetResultMessage: Hashable, Sendable {
    /// The canonical device forgotten.
    public var deviceID: String
    public var vendor: String
    /// The other IDs that answer GONE with it, sorted.
    public var aliasIDs: [String]
    /// The device was gone already; nothing was written.
    public var alreadyGone: Bool

    public init(deviceID: String, vendor: String, aliasIDs: [String], alreadyGone: Bool) {
        self.deviceID = deviceID
        self.vendor = vendor
        self.aliasIDs = aliasIDs
        self.alreadyGone = alreadyGone
    }
}

/// Converts forget requests and answers between their Swift and protobuf-c forms.
enum ForgetCodec {
    static func forgetRequest(_ deviceID: String, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__ForgetRequest> {
        var message = Registry__V1__ForgetRequest()
        registry__v1__forget_request__init(&message)
        message.device_id = arena.string(deviceID)
        return arena.new(message)
    }

    static func forgetResult(_ result: ForgetResultMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__ForgetResult> {
        var message = Registry__V1__ForgetResult()
        registry__v1__forget_result__init(&message)
        message.device_id = arena.string(result.deviceID)
        message.vendor = arena.string(result.vendor)
        (message.n_alias_ids, message.alias_ids) = arena.strings(result.aliasIDs)
        message.already_gone = result.alreadyGone ? 1 : 0
        return arena.new(message)
    }

    static func forgetResult(_ message: Registry__V1__ForgetResult) -> ForgetResultMessage {
        ForgetResultMessage(
            deviceID: CRead.string(message.device_id), vendor: CRead.string(message.vendor),
            aliasIDs: CRead.strings(message.n_alias_ids, message.alias_ids), alreadyGone: message.already_gone != 0)
    }
}
