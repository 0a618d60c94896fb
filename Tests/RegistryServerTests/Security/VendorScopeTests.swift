import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// What a vendor-scoped token lets a connection do, decided by the node's pure state: another
/// vendor's registrations and lookups are PERMISSION_DENIED, another vendor's device IDs are
/// NOT_FOUND, and operator requests need admin.
@Suite struct VendorScopeTests {
    let acme = ConnectionAccess.token(
        AccessToken(subject: "billing", vendors: .only(["com.acme"]), roles: [.register, .read], expiresAt: .max))
    let readOnly = ConnectionAccess.token(AccessToken(subject: "ro", vendors: .only(["com.acme"]), roles: [.read], expiresAt: .max))

    func node() -> NodeState { .alone() }

    func answer(_ node: inout NodeState, _ body: ClientBody, _ access: ConnectionAccess) -> ServerBody {
        node.answer(body, access: access)
    }

    func errorCode(_ body: ServerBody) -> ErrorCode? {
        if case .error(let error) = body { return error.code }
        return nil
    }

    let idfv = "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b90"

    @Test func registrationsOfAnotherVendorAreDeniedItemByItem() {
        var state = node()
        #expect(errorCode(answer(&state, .register(RegisterRequest(bundleID: "com.acme.app", idfv: idfv)), acme)) == nil)
        #expect(errorCode(answer(&state, .register(RegisterRequest(bundleID: "com.other.app", idfv: idfv)), acme)) == .permissionDenied)
        #expect(errorCode(answer(&state, .register(RegisterRequest(bundleID: "com.acme.app", idfv: idfv)), readOnly)) == .permissionDenied)
        let batch = answer(
            &state,
            .registerBatch([RegisterRequest(bundleID: "com.other.x", idfv: idfv), RegisterRequest(bundleID: "com.acme.y", idfv: idfv)]), acme)
        guard case .registerBatchResult(let items) = batch else { return #expect(Bool(false), "\(batch)") }
        guard case .error(let denied) = items[0], case .result = items[1] else { return #expect(Bool(false), "\(items)") }
        #expect(denied.code == .permissionDenied)
        // Nothing of the denied registrations reached the state.
        #expect(state.registry.snapshot().canonical.count == 1)
    }

    @Test func anotherVendorsDeviceIsNotFoundAndItsLookupsDenied() {
        var state = node()
        guard case .registerResult(let other) = answer(&state, .register(RegisterRequest(bundleID: "com.other.app", idfv: idfv)), .unrestricted)
        else { return #expect(Bool(false)) }
        #expect(errorCode(answer(&state, .resolve(deviceID: other.deviceID), .unrestricted)) == nil)
        // The same answer as for an ID that does not exist.
        #expect(errorCode(answer(&state, .resolve(deviceID: other.deviceID), acme)) == .notFound)
        #expect(errorCode(answer(&state, .resolve(deviceID: "01890000-0000-7000-8000-000000000000"), acme)) == .notFound)
        let lookup = LookupRequest(scope: .vendor("com.other"), identifier: PresentedIdentifier(rawKind: 2, text: idfv))
        #expect(errorCode(answer(&state, .lookup(lookup), acme)) == .permissionDenied)
        #expect(errorCode(answer(&state, .lookup(lookup), .unrestricted)) == nil)
    }

    /// Preparing a request makes the names it gives, which a node keeps for good
    /// (``InternedText``): a request the token does not allow, of a role it grants on no vendor
    /// or of a vendor it does not reach, is refused before it is prepared, so that it makes none.
    @Test func requestsTheTokenDoesNotAllowMakeNoNames() {
        var state = node()
        let run = UInt64.random(in: 1 ... .max)
        let vendor = "com.unmade\(run)"
        let node = "node-unmade-\(run)"
        let device = UUID128(high: 1, low: 1).text
        let denied: [ClientBody] = [
            .register(RegisterRequest(bundleID: "\(vendor).app", idfv: idfv)),
            .bind(BindingRequest(scope: .vendor(vendor), account: "alice", deviceID: device)),
            .unbind(BindingRequest(scope: .bundle("\(vendor).app"), account: "alice", deviceID: device)),
            .removeMember(nodeID: node),
            .vendor(.add(VendorRuleMessage(name: vendor, prefixes: ["\(vendor).rule"]))),
            .vendor(.set(VendorRuleMessage(name: vendor, prefixes: ["\(vendor).rule"]))),
        ]
        for body in denied {
            #expect(errorCode(answer(&state, body, readOnly)) == .permissionDenied, "\(body)")
        }
        let batch = answer(&state, .registerBatch([RegisterRequest(bundleID: "\(vendor).batch", idfv: idfv)]), readOnly)
        guard case .registerBatchResult(let items) = batch, case .error(let error) = items.first else { return #expect(Bool(false), "\(batch)") }
        #expect(error.code == .permissionDenied && items.count == 1)
        for text in [vendor, "\(vendor).app", "\(vendor).batch", "\(vendor).rule", node] {
            #expect(InternedText.existing(text) == nil, "\(text) was made")
        }
        // A token that grants the role on com.acme: another vendor's requests are refused as
        // they were refused before, but before their names are made; com.acme's go on, in place.
        let register = answer(&state, .register(RegisterRequest(bundleID: "\(vendor).app", idfv: idfv)), acme)
        guard case .error(let registerError) = register else { return #expect(Bool(false), "\(register)") }
        #expect(registerError.code == .permissionDenied && registerError.message.contains("on vendor \(vendor)"), "\(registerError)")
        #expect(errorCode(answer(&state, .bind(BindingRequest(scope: .vendor(vendor), account: "alice", deviceID: device)), acme)) == .permissionDenied)
        let mixed = answer(
            &state, .registerBatch([RegisterRequest(bundleID: "\(vendor).batch", idfv: idfv), RegisterRequest(bundleID: "com.acme.app", idfv: idfv)]),
            acme)
        guard case .registerBatchResult(let mixedItems) = mixed, mixedItems.count == 2, case .error(let other) = mixedItems[0],
            case .result = mixedItems[1]
        else { return #expect(Bool(false), "\(mixed)") }
        #expect(other.code == .permissionDenied)
        for text in [vendor, "\(vendor).app", "\(vendor).batch"] {
            #expect(InternedText.existing(text) == nil, "\(text) was made")
        }
        // A batch past the limit is refused whole, as before any token check.
        let tooMany = Array(repeating: RegisterRequest(bundleID: "com.acme.app", idfv: idfv), count: Int(Limits.default.maxBatchSize) + 1)
        #expect(errorCode(answer(&state, .registerBatch(tooMany), readOnly)) == .batchTooLarge)
    }

    @Test func operatorRequestsNeedAdmin() {
        var state = node()
        for body in [ClientBody.stats, .snapshot, .removeMember(nodeID: "node-b")] {
            #expect(errorCode(answer(&state, body, acme)) == .permissionDenied, "\(body)")
        }
        let admin = ConnectionAccess.token(AccessToken(subject: "ops", vendors: .all, roles: [.admin], expiresAt: .max))
        #expect(errorCode(answer(&state, .removeMember(nodeID: "node-b"), admin)) == .notFound)
    }
}
