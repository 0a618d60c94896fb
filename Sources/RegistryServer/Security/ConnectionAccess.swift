import RegistryAuth
import RegistryCore
import RegistryWire

/// What one client connection may do: everything, on a node without a token secret, or what
/// its verified token grants. Requests it does not allow are answered PERMISSION_DENIED, except
/// resolving another vendor's device ID, which is answered NOT_FOUND so that IDs cannot be probed.
enum ConnectionAccess: Sendable, Equatable {
    case unrestricted
    case token(AccessToken)

    func allows(_ role: TokenRole, vendor: String) -> Bool {
        switch self {
        case .unrestricted: return true
        case .token(let token): return token.allows(role, vendor: vendor)
        }
    }

    func allows(_ role: TokenRole) -> Bool {
        switch self {
        case .unrestricted: return true
        case .token(let token): return token.roles.contains(role)
        }
    }

    /// Whether it reaches every vendor: only then may it learn of a device whose vendor the node
    /// does not know (one known only as forgotten).
    var reachesEveryVendor: Bool {
        switch self {
        case .unrestricted: return true
        case .token(let token): return token.vendors == .all
        }
    }

    /// The refusal of `role` on `vendor`, as the client reads it.
    static func denied(_ role: TokenRole, vendor: String? = nil) -> WireError {
        WireError(
            code: .permissionDenied,
            message: vendor.map { "the token does not grant \(role) on vendor \($0)" } ?? "the token does not grant \(role)")
    }

    /// `body` prepared (``NodeState/prepare(_:resolver:limits:identifierKey:)``), or refused
    /// PERMISSION_DENIED where this access does not allow it: a registration, bind or unbind
    /// whose vendor it does not cover for `register` (a bind or an unbind is allowed with `admin`
    /// too; a batch's registrations item by item), operator requests (stats, snapshot, member
    /// removal) without `admin`, and vendor rule changes without `admin` on every vendor.
    /// Refused before it is prepared, the vendor found by name: preparing makes the names a
    /// request gives (vendors, bundle IDs, node IDs), which a node keeps for good
    /// (``InternedText``). Resolves and lookups are checked where the state tells their vendor
    /// (``NodeState``).
    func prepare(
        _ body: ClientBody, resolver: inout BundleResolver, limits: Limits, identifierKey: IdentifierKey
    ) -> NodeState.Prepared {
        guard case .token = self else { return NodeState.prepare(body, resolver: &resolver, limits: limits, identifierKey: identifierKey) }
        switch body {
        case .register(let request):
            if let denial = registrationDenial(request.bundleID, rules: resolver.rules) { return .register(.failure(denial)) }
        case .registerBatch(let requests) where requests.count <= Int(limits.maxBatchSize):
            let denials = requests.map { registrationDenial($0.bundleID, rules: resolver.rules) }
            guard denials.contains(where: { $0 != nil }) else { break }
            // The others are prepared as a batch of their own; the denied keep their places.
            let allowed = requests.indices.filter { denials[$0] == nil }.map { requests[$0] }
            guard case .registerBatch(let prepared) = NodeState.prepare(.registerBatch(allowed), resolver: &resolver, limits: limits, identifierKey: identifierKey)
            else { preconditionFailure("a batch within the limit is prepared as a batch") }
            var batch = NodeState.ValidatedBatch()
            batch.registrations = prepared.registrations
            var next = prepared.items.makeIterator()
            batch.items = denials.map { denial in denial.map { .failure($0) } ?? next.next()! }
            return .registerBatch(batch)
        case .bind(let request), .unbind(let request):
            if let denial = bindingDenial(request.scope, rules: resolver.rules) { return .binding(.failure(denial)) }
        case .stats, .snapshot, .removeMember:
            if !allows(.admin) { return .refused(Self.denied(.admin)) }
        case .vendor(.add), .vendor(.set), .vendor(.remove):
            // A rule change can move every device of a vendor into another: only a token that
            // reaches every vendor may make one, or admin on one vendor would reach them all.
            if !allows(.admin) || !reachesEveryVendor {
                return .refused(WireError(code: .permissionDenied, message: "changing the vendor rules needs admin on every vendor (vendors=*)"))
            }
        default:
            break
        }
        return NodeState.prepare(body, resolver: &resolver, limits: limits, identifierKey: identifierKey)
    }

    /// The refusal of registering the bundle ID `text` when the token does not grant `register`
    /// on the vendor `rules` file it under, found without making the names; nil when it does, or
    /// when the text is no bundle ID (preparing says so, and makes no name).
    private func registrationDenial(_ text: String, rules: VendorRules) -> WireError? {
        if allows(.register) && reachesEveryVendor { return nil }
        guard let vendor = try? rules.vendorName(ofBundle: text) else { return nil }
        return allows(.register, vendor: vendor) ? nil : Self.denied(.register, vendor: vendor)
    }

    /// As ``registrationDenial(_:rules:)``, for a bind or an unbind of the vendor `scope` names,
    /// which `admin` on that vendor allows too: an admin token limited to some vendors changes
    /// no other vendor's bindings.
    private func bindingDenial(_ scope: LookupRequest.Scope, rules: VendorRules) -> WireError? {
        if (allows(.admin) || allows(.register)) && reachesEveryVendor { return nil }
        guard let vendor = (try? NodeState.vendorName(of: scope, rules: rules)) ?? nil else { return nil }
        return allows(.register, vendor: vendor) || allows(.admin, vendor: vendor) ? nil : Self.denied(.register, vendor: vendor)
    }
}
