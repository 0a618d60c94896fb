import CProtobufC
import CRegistryProto

/// The account messages (`Protos/registry/v1/account.proto`) to and from their protobuf-c forms,
/// for ``ClientFrame`` and ``ServerFrame``.
enum AccountCodec {
    // MARK: Requests

    /// A bind or an unbind request's fields, read from either message (their fields are the same).
    static func bindingRequest(
        scopeCase: UInt32, bundleID: UnsafeMutablePointer<CChar>?, vendor: UnsafeMutablePointer<CChar>?,
        account: UnsafeMutablePointer<CChar>?, deviceID: UnsafeMutablePointer<CChar>?
    ) -> BindingRequest {
        BindingRequest(
            scope: scope(scopeCase, bundleID: bundleID, vendor: vendor), account: CRead.string(account),
            deviceID: CRead.string(deviceID))
    }

    static func bindRequest(_ request: Registry__V1__BindRequest) -> BindingRequest {
        bindingRequest(
            scopeCase: request.scope_case.rawValue, bundleID: request.bundle_id, vendor: request.vendor, account: request.account,
            deviceID: request.device_id)
    }

    static func unbindRequest(_ request: Registry__V1__UnbindRequest) -> BindingRequest {
        bindingRequest(
            scopeCase: request.scope_case.rawValue, bundleID: request.bundle_id, vendor: request.vendor, account: request.account,
            deviceID: request.device_id)
    }

    static func accountQuery(_ request: Registry__V1__AccountRequest) -> AccountQuery {
        let subject: AccountQuery.Subject
        switch request.subject_case {
        case REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_ACCOUNT: subject = .account(CRead.string(request.account))
        case REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_ACCOUNT_KEY: subject = .accountKey(CRead.string(request.account_key))
        case REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_DEVICE_ID: subject = .device(CRead.string(request.device_id))
        default: subject = .unspecified
        }
        return AccountQuery(
            scope: scope(request.scope_case.rawValue, bundleID: request.bundle_id, vendor: request.vendor), subject: subject)
    }

    /// The three request messages number their scope cases alike: 1 a bundle ID, 2 a vendor.
    private static func scope(
        _ scopeCase: UInt32, bundleID: UnsafeMutablePointer<CChar>?, vendor: UnsafeMutablePointer<CChar>?
    ) -> LookupRequest.Scope {
        switch scopeCase {
        case 1: return .bundle(CRead.string(bundleID))
        case 2: return .vendor(CRead.string(vendor))
        default: return .unspecified
        }
    }

    /// Sets a request message's scope from `scope`: its case number (0 when unspecified) and strings.
    static func write(
        _ scope: LookupRequest.Scope, in arena: CArena, _ set: (UInt32, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<CChar>?) -> Void
    ) {
        switch scope {
        case .bundle(let bundle): set(1, arena.string(bundle), nil)
        case .vendor(let vendor): set(2, nil, arena.string(vendor))
        case .unspecified: set(0, nil, nil)
        }
    }

    static func bindRequest(_ request: BindingRequest, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__BindRequest> {
        var message = Registry__V1__BindRequest()
        registry__v1__bind_request__init(&message)
        write(request.scope, in: arena) { scopeCase, bundle, vendor in
            message.scope_case = Registry__V1__BindRequest__ScopeCase(rawValue: scopeCase)
            if let bundle { message.bundle_id = bundle }
            if let vendor { message.vendor = vendor }
        }
        message.account = arena.string(request.account)
        message.device_id = arena.string(request.deviceID)
        return arena.new(message)
    }

    static func unbindRequest(_ request: BindingRequest, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__UnbindRequest> {
        var message = Registry__V1__UnbindRequest()
        registry__v1__unbind_request__init(&message)
        write(request.scope, in: arena) { scopeCase, bundle, vendor in
            message.scope_case = Registry__V1__UnbindRequest__ScopeCase(rawValue: scopeCase)
            if let bundle { message.bundle_id = bundle }
            if let vendor { message.vendor = vendor }
        }
        message.account = arena.string(request.account)
        message.device_id = arena.string(request.deviceID)
        return arena.new(message)
    }

    static func accountRequest(_ query: AccountQuery, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__AccountRequest> {
        var message = Registry__V1__AccountRequest()
        registry__v1__account_request__init(&message)
        write(query.scope, in: arena) { scopeCase, bundle, vendor in
            message.scope_case = Registry__V1__AccountRequest__ScopeCase(rawValue: scopeCase)
            if let bundle { message.bundle_id = bundle }
            if let vendor { message.vendor = vendor }
        }
        switch query.subject {
        case .account(let name):
            message.subject_case = REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_ACCOUNT
            message.account = arena.string(name)
        case .accountKey(let key):
            message.subject_case = REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_ACCOUNT_KEY
            message.account_key = arena.string(key)
        case .device(let id):
            message.subject_case = REGISTRY__V1__ACCOUNT_REQUEST__SUBJECT_DEVICE_ID
            message.device_id = arena.string(id)
        case .unspecified:
            break
        }
        return arena.new(message)
    }

    // MARK: Answers

    static func bindResult(_ result: Registry__V1__BindResult) throws(CodecError) -> BindResultMessage {
        BindResultMessage(
            outcome: BindOutcomeCode(rawValue: Int32(truncatingIfNeeded: result.outcome.rawValue)) ?? .unspecified,
            replacedDeviceID: CRead.string(result.replaced_device_id),
            account: try result.account.map { (pointer) throws(CodecError) in try account(pointer.pointee) })
    }

    static func accounts(_ message: Registry__V1__Accounts) throws(CodecError) -> [AccountBindingsMessage] {
        try CRead.messages(message.n_accounts, message.accounts) { (item) throws(CodecError) in try account(item) }
    }

    private static func account(_ message: Registry__V1__AccountBindings) throws(CodecError) -> AccountBindingsMessage {
        AccountBindingsMessage(
            vendor: CRead.string(message.vendor), accountKey: CRead.string(message.account_key),
            bound: try CRead.messages(message.n_bound, message.bound) { device in
                BoundDeviceMessage(
                    deviceID: CRead.string(device.device_id), sinceMillis: device.since_ms, lastActiveMillis: device.last_active_ms)
            },
            unbound: try CRead.messages(message.n_unbound, message.unbound) { device in
                UnboundDeviceMessage(
                    deviceID: CRead.string(device.device_id),
                    reason: UnboundDeviceMessage.Reason(rawValue: Int32(truncatingIfNeeded: device.reason.rawValue)) ?? .unspecified,
                    replacedBy: CRead.string(device.replaced_by), atMillis: device.at_ms)
            })
    }

    static func bindResult(_ result: BindResultMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__BindResult> {
        var message = Registry__V1__BindResult()
        registry__v1__bind_result__init(&message)
        message.outcome = Registry__V1__BindOutcome(rawValue: .init(truncatingIfNeeded: result.outcome.rawValue))
        message.replaced_device_id = arena.string(result.replacedDeviceID)
        message.account = result.account.map { account($0, in: arena) }
        return arena.new(message)
    }

    static func accounts(_ accounts: [AccountBindingsMessage], in arena: CArena) -> UnsafeMutablePointer<Registry__V1__Accounts> {
        var message = Registry__V1__Accounts()
        registry__v1__accounts__init(&message)
        message.n_accounts = accounts.count
        message.accounts = arena.array(accounts.map { Optional(account($0, in: arena)) })
        return arena.new(message)
    }

    private static func account(
        _ account: AccountBindingsMessage, in arena: CArena
    ) -> UnsafeMutablePointer<Registry__V1__AccountBindings> {
        var message = Registry__V1__AccountBindings()
        registry__v1__account_bindings__init(&message)
        message.vendor = arena.string(account.vendor)
        message.account_key = arena.string(account.accountKey)
        message.n_bound = account.bound.count
        message.bound = arena.array(
            account.bound.map { device in
                var bound = Registry__V1__BoundDevice()
                registry__v1__bound_device__init(&bound)
                bound.device_id = arena.string(device.deviceID)
                bound.since_ms = device.sinceMillis
                bound.last_active_ms = device.lastActiveMillis
                return Optional(arena.new(bound))
            })
        message.n_unbound = account.unbound.count
        message.unbound = arena.array(
            account.unbound.map { device in
                var unbound = Registry__V1__UnboundDevice()
                registry__v1__unbound_device__init(&unbound)
                unbound.device_id = arena.string(device.deviceID)
                unbound.reason = Registry__V1__UnbindReason(rawValue: .init(truncatingIfNeeded: device.reason.rawValue))
                unbound.replaced_by = arena.string(device.replacedBy)
                unbound.at_ms = device.atMillis
                return Optional(arena.new(unbound))
            })
        return arena.new(message)
    }
}
