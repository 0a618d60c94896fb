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
        #expect(machine.frameReceived(hello(try key.issue(acme)), nowSeconds: 999, certified: false) == .acceptHello)
        #expect(machine.access == .token(acme))
        #expect(machine.frameReceived(stats, nowSeconds: 999, certified: false) == .dispatch)
    }

    @Test func aMissingForgedMalformedOrExpiredTokenIsUnauthenticated() throws {
        let forged = try TokenKey(secret: "another secret of 16+ bytes").issue(acme)
        for (token, now, words) in [
            ("", UInt64(0), "requires a token"), (forged, 0, "does not verify"), ("rgt1.x", 0, "malformed"),
            (try key.issue(acme), 1_000, "expired"),
        ] {
            var machine = ConnectionStateMachine(maxInFlight: 4, tokens: key)
            let error = refusal(machine.frameReceived(hello(token), nowSeconds: now, certified: false))
            #expect(error?.code == .unauthenticated && error?.message.contains(words) == true, "\(String(describing: error))")
            #expect(machine.state == .closed)
        }
    }

    @Test func aTokenThatExpiresDuringTheConnectionEndsIt() throws {
        var machine = ConnectionStateMachine(maxInFlight: 4, tokens: key)
        #expect(machine.frameReceived(hello(try key.issue(acme)), nowSeconds: 10, certified: false) == .acceptHello)
        #expect(machine.frameReceived(stats, nowSeconds: 999, certified: false) == .dispatch)
        #expect(refusal(machine.frameReceived(stats, nowSeconds: 1_000, certified: false))?.code == .unauthenticated)
    }

    @Test func withoutATokenSecretEveryHelloIsUnrestricted() {
        var machine = ConnectionStateMachine(maxInFlight: 4)
        #expect(machine.frameReceived(hello("rgt1.anything"), nowSeconds: 0, certified: false) == .acceptHello)
        #expect(machine.access == .unrestricted)
    }
}

/// With TLS on, a peer's hello needs a client certificate the cluster's CA signed.
@Suite struct PeerCertificateTests {
    let peerHello = ClientFrame(requestID: 0, body: .hello(Hello(role: .peer, clientName: "node-b")))

    @Test func aPeerWithoutACertificateIsUnauthenticatedAndOneWithItIsHandedOver() {
        var uncertified = ConnectionStateMachine(maxInFlight: 4, peersNeedCertificate: true)
        guard case .failConnection(let error) = uncertified.frameReceived(peerHello, nowSeconds: 0, certified: false) else {
            return #expect(Bool(false))
        }
        #expect(error.code == .unauthenticated && error.message.contains("certificate"))
        var certified = ConnectionStateMachine(maxInFlight: 4, peersNeedCertificate: true)
        #expect(certified.frameReceived(peerHello, nowSeconds: 0, certified: true) == .acceptPeer)
        // Without TLS, peers prove the cluster secret in the peer handshake instead.
        var plain = ConnectionStateMachine(maxInFlight: 4)
        #expect(plain.frameReceived(peerHello, nowSeconds: 0, certified: false) == .acceptPeer)
    }
}
