import Testing
@testable import RegistryAuth

@Suite struct TokenKeyTests {
    let key = TokenKey(secret: "token secret")
    let acme = AccessToken(subject: "billing-api", vendors: .only(["com.acme"]), roles: [.register, .read], expiresAt: 2_000)

    @Test func anIssuedTokenVerifiesToItsClaimsUntilItExpires() throws {
        let text = try key.issue(acme)
        #expect(text.hasPrefix("rgt1."))
        #expect(try key.verify(text, now: 1_999) == acme)
        #expect(throws: TokenError.expired(at: 2_000)) { try key.verify(text, now: 2_000) }
        let operator_ = AccessToken(subject: "ops", vendors: .all, roles: [.admin], expiresAt: 9_000)
        #expect(try key.verify(try key.issue(operator_), now: 0) == operator_)
    }

    @Test func aTokenOfAnotherSecretOrAlteredIsForged() throws {
        let text = try key.issue(acme)
        #expect(throws: TokenError.forged) { try TokenKey(secret: "other").verify(text, now: 0) }
        // Claims swapped for another token's, signature kept.
        let wider = try key.issue(AccessToken(subject: "x", vendors: .all, roles: [.admin], expiresAt: 9_999))
        let parts = text.split(separator: ".")
        let spliced = "rgt1.\(wider.split(separator: ".")[1]).\(parts[2])"
        #expect(throws: TokenError.forged) { try key.verify(spliced, now: 0) }
        // One character of the signature changed.
        var bytes = Array(text.utf8)
        bytes[bytes.count - 2] = bytes[bytes.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: TokenError.forged) { try key.verify(String(decoding: bytes, as: UTF8.self), now: 0) }
    }

    @Test(arguments: ["", "rgt1", "rgt1.a.b.c", "jwt.abc.def", "rgt1.!!!.abc", "rgt1.YQ.%%"])
    func junkIsMissingOrMalformed(_ text: String) {
        #expect(throws: (any Error).self) { try key.verify(text, now: 0) }
        do {
            _ = try key.verify(text, now: 0)
        } catch {
            if text.isEmpty { #expect(error == .missing) } else if case .malformed = error {} else { Issue.record("\(error)") }
        }
    }

    @Test func claimsThatCannotBeWrittenAreRefusedAtIssue() {
        #expect(throws: (TokenError).self) { try key.issue(AccessToken(subject: "s", vendors: .only([]), roles: [.read], expiresAt: 1)) }
        #expect(throws: (TokenError).self) { try key.issue(AccessToken(subject: "s", vendors: .only(["a,b"]), roles: [.read], expiresAt: 1)) }
        #expect(throws: (TokenError).self) { try key.issue(AccessToken(subject: "s", vendors: .all, roles: [], expiresAt: 1)) }
        #expect(throws: (TokenError).self) { try key.issue(AccessToken(subject: "a\nb", vendors: .all, roles: [.read], expiresAt: 1)) }
    }

    @Test func base64URLRoundTripsEveryLengthAndRefusesJunk() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ length &* 13) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(Substring(text)) == bytes)
        }
        #expect(Base64URL.decode("A") == nil)  // 6 bits: no byte
        #expect(Base64URL.decode("YR") == nil)  // non-zero padding bits
        #expect(Base64URL.decode("a+b/") == nil)
    }
}
