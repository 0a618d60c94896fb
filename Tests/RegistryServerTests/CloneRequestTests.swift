import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Clones as a node decides them (``NodeState``): a registration that shows one logs the clone
/// operation after it, only while the members read clones; the clones request lists them within
/// what the caller's token reaches, and refuses a vendor it cannot name.
@Suite struct CloneRequestTests {
    let helper = AccountRequestTests()
    static let keychain = "AAAAAAAA-1111-4111-8111-111111111111"

    func register(_ node: inout NodeState, _ bundle: String, idfv: String) -> AccountRequestTests.Answer {
        helper.ask(&node, .register(RegisterRequest(bundleID: bundle, keychain: Self.keychain, idfv: idfv)))
    }

    func clones(_ answer: AccountRequestTests.Answer) -> [SuspectedCloneMessage]? {
        if case .clones(let clones) = answer.body { return clones }
        return nil
    }

    @Test func aCloneIsLoggedAfterItsRegistrationOnlyWhileTheMembersReadClones() throws {
        var node = try helper.node()
        _ = register(&node, "com.acme.a", idfv: "BBBBBBBB-1111-4111-8111-111111111111")
        _ = register(&node, "com.acme.b", idfv: "CCCCCCCC-1111-4111-8111-111111111111")
        node.clonesAllowed = false
        let held = register(&node, "com.acme.a", idfv: "BBBBBBBB-1111-4111-8111-111111111111")
        #expect(held.logged.count == 1, "a member before 1.2: the registration alone")
        node.clonesAllowed = true
        let shown = register(&node, "com.acme.a", idfv: "BBBBBBBB-1111-4111-8111-111111111111")
        #expect(shown.logged.count == 2)
        guard case .registration = shown.logged.first?.operation, case .clone(let clone) = shown.logged.last?.operation else {
            Issue.record("\(shown.logged)")
            return
        }
        #expect(clone.action == .flag && clone.decidedBy == node.nodeID)
        #expect(shown.logged[1].sequence == shown.logged[0].sequence + 1 && shown.logged[1].timestamp > shown.logged[0].timestamp)
        #expect(register(&node, "com.acme.a", idfv: "BBBBBBBB-1111-4111-8111-111111111111").logged.count == 1, "marked once")
    }

    @Test func theClonesRequestListsWithinTheTokenAndRefusesAnUnknownVendor() throws {
        var node = try helper.node()
        for idfv in ["BBBBBBBB-1111-4111-8111-111111111111", "CCCCCCCC-1111-4111-8111-111111111111", "BBBBBBBB-1111-4111-8111-111111111111"] {
            _ = register(&node, "com.acme.a", idfv: idfv)
        }
        let all = try #require(clones(helper.ask(&node, .clones(vendor: ""))))
        #expect(all.count == 1 && all.first?.vendor == "com.acme" && all.first?.action == .flag && all.first?.decidedBy == "node-a")
        #expect(clones(helper.ask(&node, .clones(vendor: "com.acme.other")))?.count == 1, "a bundle ID names its vendor")
        let reader = ConnectionAccess.token(AccessToken(subject: "r", vendors: .only(["com.acme"]), roles: [.read], expiresAt: .max))
        let elsewhere = ConnectionAccess.token(AccessToken(subject: "e", vendors: .only(["com.other"]), roles: [.read], expiresAt: .max))
        let registerOnly = ConnectionAccess.token(AccessToken(subject: "w", vendors: .only(["com.acme"]), roles: [.register], expiresAt: .max))
        #expect(clones(helper.ask(&node, .clones(vendor: "com.acme"), access: reader))?.count == 1)
        #expect(clones(helper.ask(&node, .clones(vendor: ""), access: elsewhere))?.isEmpty == true, "another vendor's clones are not listed")
        #expect(helper.errorCode(helper.ask(&node, .clones(vendor: "com.acme"), access: elsewhere)) == .permissionDenied)
        #expect(helper.errorCode(helper.ask(&node, .clones(vendor: ""), access: registerOnly)) == .permissionDenied)
        #expect(helper.errorCode(helper.ask(&node, .clones(vendor: "not a vendor"))) == .invalidArgument)
    }
}
