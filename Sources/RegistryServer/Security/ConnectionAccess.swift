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

    /// `body` prepared (``NodeState/prepare(_:resolver:limits:identifierKey:)``) and authorised
    /// (``authorize(_:)``), or refused unprepared when the token grants a role it needs on no
    /// vendor: preparing makes the names a request gives (vendors, bundle IDs, node IDs), which a
    /// node keeps for good (``InternedText``).
    func prepare(
        _ body: ClientBody, resolver: inout BundleResolver, limits: Limits, identifierKey: IdentifierKey
    ) -> NodeState.Prepared {
        if let refusal = refusalUnprepared(body) { return refusal }
        return authorize(NodeState.prepare(body, resolver: &resolver, limits: limits, identifierKey: identifierKey))
    }

    /// What ``authorize(_:)`` refuses whatever vendor `body` names, in the form it would; nil
    /// for the rest.
    private func refusalUnprepared(_ body: ClientBody) -> NodeState.Prepared? {
        guard case .token = self else { return nil }
        switch body {
        case .register where !allows(.register):
            return .register(.failure(Self.denied(.register)))
        case .registerBatch(let requests) where !allows(.register):
            var batch = NodeState.ValidatedBatch()
            batch.items = requests.map { _ in .failure(Self.denied(.register)) }
            return .registerBatch(batch)
        case .bind, .unbind:
            return allows(.register) || allows(.admin) ? nil : .binding(.failure(Self.denied(.register)))
        case .removeMember, .vendor(.add), .vendor(.set), .vendor(.remove):
            return allows(.admin) ? nil : .refused(Self.denied(.admin))
        default:
            return nil
        }
    }

    /// `prepared` with what this access does not allow replaced by PERMISSION_DENIED: each
    /// registration, bind and unbind whose vendor it does not cover for `register` (a bind or an
    /// unbind is allowed with `admin` too), and operator requests
    /// (stats, snapshot, member removal, vendor rule changes) without `admin`. Resolves and lookups are checked
    /// where the state tells their vendor (``NodeState``).
    func authorize(_ prepared: NodeState.Prepared) -> NodeState.Prepared {
        guard case .token = self else { return prepared }
        switch prepared {
        case .register(.success(let registration)) where !allows(.register, vendor: registration.vendor.name):
            return .register(.failure(Self.denied(.register, vendor: registration.vendor.name)))
        case .registerBatch(var batch):
            for (position, item) in batch.items.enumerated() {
                guard case .success(let index) = item else { continue }
                let vendor = batch.registrations[index].vendor.name
                if !allows(.register, vendor: vendor) { batch.items[position] = .failure(Self.denied(.register, vendor: vendor)) }
            }
            return .registerBatch(batch)
        case .binding(.success(let intent)) where !allows(.register, vendor: intent.vendor.name) && !allows(.admin):
            return .binding(.failure(Self.denied(.register, vendor: intent.vendor.name)))
        case .read(.stats), .read(.snapshot), .removeMember, .vendorChange:
            return allows(.admin) ? prepared : .refused(Self.denied(.admin))
        default:
            return prepared
        }
    }
}
