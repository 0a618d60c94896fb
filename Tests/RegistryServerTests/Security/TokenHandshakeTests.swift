import RegistryAuth
import RegistryWire
import Testing
@testable import RegistryServer

/// The connection state machine on a node with a token secret: the hello's token decides what
/// the connection may do, and an expired token ends it.
@Suite struct TokenHandshakeTests {
    let key = TokenKey(secret: "a token secret of 16+ bytes")
    let acme = AccessToken(subject: "billing", vendors: .only(["com.acme"]), roles: [.register, .read], expiresAt: 1_000)
    let stats = ClientFrame(requestID: 1, body: .stats)

    func hello(_ token: String) -> ClientFrame {
        ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: "t", token: token)))
    }

    func refusal(_ action: ConnectionStateMachine.FrameAction) -> WireError? {
        if case .failConnection(let error) = action { return error }
        return nil
    }

    @Test func aValidTokenIsAcceptedAndGrantsItsClaims() throws {
        var machine = ConnectionStateMachine(maxInFlight: 4, tokens: key)
        #expect(machine.frameReceived(hello(try key.issue(acme)), nowSeconds: 999) == .acceptHello)
        #expect(machine.access == .token(acme))
        #expect(machine.frameReceived(stats, nowSeconds: 999) == .dispatch)
    }

    @Test func aMissingForgedMalformedOrExpiredTokenIsUnauthenticated() throws {
        let forged = try TokenKey(secret: "another secret of 16+ bytes").issue(acme)
        for (token, now, words) in [
            ("", UInt64(0), "requires a token"), (forged, 0, "does not verify"), ("rgt1.x", 0, "malformed"),
            (try key.issue(acme), 1_000, "expired"),
        ] {
            var machine = ConnectionStateMachine(maxInFlight: 4, tokens: key)
            let error = refusal(machine.frameReceived(hello(token), nowSeconds: now))
            #expect(error?.code == .unauthenticated && error?.message.contains(words) == true, "\(String(describing: error))")
            #expect(machine.state == .closed)
        }
    }

    @Test func aTokenThatExpiresDuringTheConnectionEndsIt() throws {
        var machine = ConnectionStateMachine(maxInFlight: 4, tokens: key)
        #expect(machine.frameReceived(hello(try key.issue(acme)), nowSeconds: 10) == .acceptHello)
        #expect(machine.frameReceived(stats, nowSeconds: 999) == .dispatch)
        #expect(refusal(machine.frameReceived(stats, nowSeconds: 1_000))?.code == .unauthenticated)
    }

    @Test func withoutATokenSecretEveryHelloIsUnrestricted() {
        var machine = ConnectionStateMachine(maxInFlight: 4)
        #expect(machine.frameReceived(hello("rgt1.anything"), nowSeconds: 0) == .acceptHello)
        #expect(machine.access == .unrestricted)
    }
}
