import RegistryCore
import RegistryWire

/// A bind or an unbind after the checks that need no state: its vendor found, its account
/// hashed, its device ID parsed.
struct BindingIntent: Sendable, Equatable {
    let kind: BindingChange.Kind
    let vendor: Vendor
    /// The account's keyed hash.
    let account: UUID128
    let device: DeviceID
}

extension NodeState {
    /// Validates a bind or an unbind (``Prepared/binding(_:)``).
    static func prepareBinding(
        _ kind: BindingChange.Kind, _ request: BindingRequest, rules: VendorRules, identifierKey: IdentifierKey
    ) -> Result<BindingIntent, WireError> {
        do throws(IdentityError) {
            let vendor = Vendor(trusted: try Self.namedVendorName(request.scope, rules: rules))
            let account = try AccountName(validating: request.account)
            let device = try DeviceID(parsing: request.deviceID)
            return .success(BindingIntent(kind: kind, vendor: vendor, account: identifierKey.seal(account), device: device))
        } catch {
            return .failure(WireError(error))
        }
    }

    /// The name of the vendor a request names, by bundle ID or by name, without making the
    /// vendor (a read must not add names to the process's texts, ``InternedText``); nil when
    /// it names none.
    static func vendorName(of scope: LookupRequest.Scope, rules: VendorRules) throws(IdentityError) -> String? {
        switch scope {
        case .bundle(let text): return try rules.vendorName(ofBundle: text)
        case .vendor(let name): return try rules.vendorName(named: name)
        case .unspecified: return nil
        }
    }

    /// The name of the vendor an account request names, which it must.
    private static func namedVendorName(_ scope: LookupRequest.Scope, rules: VendorRules) throws(IdentityError) -> String {
        guard let name = try vendorName(of: scope, rules: rules) else { throw .invalidVendor("the request names neither a bundle_id nor a vendor") }
        return name
    }

    /// Decides a bind or an unbind at `wallMillis` (``AccountBindings/decide(_:policy:canonical:)``):
    /// logs and applies it when it changes something, and answers what it did with the account
    /// as it is then.
    mutating func decideBinding(_ intent: BindingIntent, wallMillis: UInt64, operations: inout [LoggedOperation]) -> ServerBody {
        // Another vendor's device is not found, as a resolve does not find it.
        guard registry.vendor(of: intent.device) == intent.vendor else {
            return .error(WireError(code: .notFound, message: "no device \(intent.device) in vendor \(intent.vendor)"))
        }
        if registry.isGone(intent.device) { return .error(Self.gone(intent.device)) }
        let key = AccountKey(vendor: intent.vendor, account: intent.account)
        let held = registry.bindings(of: key) ?? AccountBindings()
        var now = clock.tick(wallMillis: wallMillis)
        if let last = held.changes.last, now <= last.time {
            // Every change held was observed by the clock (its log entry carries its time), so this
            // is only a peer's change stamped apart from its entry: move past it.
            do {
                _ = try clock.observe(last.time, wallMillis: wallMillis)
            } catch {
                return .error(WireError(code: .clockSkew, message: "an earlier change of this account is too far ahead: \(error)", retryable: true))
            }
            now = clock.tick(wallMillis: wallMillis)
        }
        let change = BindingChange(kind: intent.kind, vendor: intent.vendor, account: intent.account, device: intent.device, time: now, origin: nodeID)
        let policy = rules.bindingPolicy(of: intent.vendor)
        let outcome = held.decide(change, policy: policy, canonical: { registry.canonical(of: $0) })
        let code: BindOutcomeCode
        var replaced = ""
        switch outcome {
        case .bound(let device):
            code = .bound
            replaced = device.map { $0.description } ?? ""
        case .alreadyBound: code = .alreadyBound
        case .rejected: code = .rejected
        case .unbound: code = .unbound
        case .notBound: code = .notBound
        }
        if code != .rejected && code != .notBound { log(.binding(change), at: now, operations: &operations) }
        return .bindResult(BindResultMessage(outcome: code, replacedDeviceID: replaced, account: accountMessage(key)))
    }

    /// Answers an account request: one account's devices, or a device's accounts.
    func answerAccount(_ query: AccountQuery, access: ConnectionAccess) -> ServerBody {
        do throws(IdentityError) {
            let name = try Self.namedVendorName(query.scope, rules: rules)
            guard access.allows(.read, vendor: name) else { return .error(ConnectionAccess.denied(.read, vendor: name)) }
            // A vendor this process never made holds nothing (``Vendor/init(known:)``).
            let vendor = Vendor(known: name)
            switch query.subject {
            case .account(let text):
                let account = identifierKey.seal(try AccountName(validating: text))
                guard let vendor else { return .accounts([]) }
                let key = AccountKey(vendor: vendor, account: account)
                return .accounts(registry.bindings(of: key) == nil ? [] : [accountMessage(key)])
            case .accountKey(let text):
                guard let account = UUID128(text: text) else { throw .invalidAccount("account key \(text.debugDescription) is not UUID text") }
                guard let vendor else { return .accounts([]) }
                let key = AccountKey(vendor: vendor, account: account)
                return .accounts(registry.bindings(of: key) == nil ? [] : [accountMessage(key)])
            case .device(let text):
                let device = try DeviceID(parsing: text)
                guard let vendor, registry.vendor(of: device) == vendor else {
                    return .error(WireError(code: .notFound, message: "no device \(device) in vendor \(name)"))
                }
                if registry.isGone(device) { return .error(Self.gone(device)) }
                return .accounts(registry.accounts(of: device).filter { $0.vendor == vendor }.map { accountMessage($0) })
            case .unspecified:
                throw .invalidAccount("an account request names an account, an account key or a device ID")
            }
        } catch {
            return .error(WireError(error))
        }
    }

    /// `key`'s account as the node holds it now, under its vendor's policy.
    func accountMessage(_ key: AccountKey) -> AccountBindingsMessage {
        let resolution = (registry.bindings(of: key) ?? AccountBindings())
            .resolve(policy: rules.bindingPolicy(of: key.vendor), canonical: { registry.canonical(of: $0) })
        return AccountBindingsMessage(
            vendor: key.vendor.name, accountKey: key.account.text,
            bound: resolution.bound.map {
                BoundDeviceMessage(deviceID: $0.device.description, sinceMillis: $0.since.millis, lastActiveMillis: $0.lastActive.millis)
            },
            unbound: resolution.unbound.map { device in
                let (reason, replacedBy): (UnboundDeviceMessage.Reason, DeviceID?)
                switch device.reason {
                case .unbound: (reason, replacedBy) = (.unbound, nil)
                case .refused: (reason, replacedBy) = (.refused, nil)
                case .replaced(let by): (reason, replacedBy) = (.replaced, by)
                }
                return UnboundDeviceMessage(
                    deviceID: device.device.description, reason: reason, replacedBy: replacedBy?.description ?? "", atMillis: device.time.millis)
            })
    }
}
