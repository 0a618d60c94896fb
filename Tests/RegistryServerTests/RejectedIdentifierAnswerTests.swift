import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Identifiers the identity rules ignore are answered back with the registration that presented
/// them: one request, and each item of a batch with its own, also when a token's denials take
/// items out of the batch that is validated (each answer then finds its registration by index,
/// `NodeState.ValidatedBatch.items`).
@Suite struct RejectedIdentifierAnswerTests {
    let acme = ConnectionAccess.token(
        AccessToken(subject: "billing", vendors: .only(["com.acme"]), roles: [.register, .read], expiresAt: .max))
    let zero = "00000000-0000-0000-0000-000000000000"

    /// A request with a valid IDFV and a keychain UUID that the rules ignore.
    func request(_ bundle: String, idfv: String, badKeychain: String) -> RegisterRequest {
        RegisterRequest(
            bundleID: bundle,
            identifiers: [PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, text: badKeychain), PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, text: idfv)])
    }

    @Test func aRegistrationIsAnsweredWithTheIdentifiersItsRulesIgnored() {
        var state = NodeState.alone()
        let body = state.answer(.register(request("com.acme.app", idfv: idfv1, badKeychain: zero)), access: .unrestricted)
        guard case .registerResult(let result) = body else { return #expect(Bool(false), "\(body)") }
        #expect(result.rejectedIdentifiers == [PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, text: zero)])
        let clean = state.answer(.register(RegisterRequest(bundleID: "com.acme.app", idfv: idfv2)), access: .unrestricted)
        guard case .registerResult(let cleanResult) = clean else { return #expect(Bool(false), "\(clean)") }
        #expect(cleanResult.rejectedIdentifiers.isEmpty)
    }

    @Test func eachItemOfABatchIsAnsweredWithItsOwn() {
        let batch = ClientBody.registerBatch([
            request("com.other.x", idfv: idfv1, badKeychain: zero),
            RegisterRequest(bundleID: "com.acme.y", idfv: idfv2),
            request("com.acme.z", idfv: "33333333-3333-4333-8333-333333333333", badKeychain: "not-a-uuid"),
            RegisterRequest(bundleID: "nodots", idfv: idfv1),
        ])
        let keychain = IdentifierKind.keychain.rawValue
        for access in [ConnectionAccess.unrestricted, acme] {
            var state = NodeState.alone()
            let body = state.answer(batch, access: access)
            guard case .registerBatchResult(let items) = body, items.count == 4 else { return #expect(Bool(false), "\(body)") }
            func rejected(_ item: BatchItem) -> [PresentedIdentifier]? {
                if case .result(let result) = item { return result.rejectedIdentifiers }
                return nil
            }
            // The token does not reach com.other: its item is denied, and the batch validated
            // without it.
            #expect(rejected(items[0]) == (access == acme ? nil : [PresentedIdentifier(rawKind: keychain, text: zero)]))
            #expect(rejected(items[1]) == [])
            #expect(rejected(items[2]) == [PresentedIdentifier(rawKind: keychain, text: "not-a-uuid")])
            #expect(rejected(items[3]) == nil, "an invalid bundle ID is an error")
        }
    }
}
