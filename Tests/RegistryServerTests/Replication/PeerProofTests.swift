import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Peers prove the cluster secret over each connection's fresh challenges: a hello or welcome
/// signed with another secret, for another challenge (a replay) or not at all is refused.
@Suite struct PeerProofTests {
    let identity = PeerIdentity(clusterID: "c", nodeID: NodeID(trusted: "node-a"), epoch: 1, mintingKeyFingerprint: 9)

    func hello(signedBy proof: PeerProof, challenge: UInt64, node: String = "node-b") -> PeerFrame {
        .hello(
            PeerHello(
                clusterID: "c", nodeID: node, epoch: 1, versionVector: [], mintingKeyFingerprint: 9,
                proof: proof.sign(.hello, challenge: challenge, nodeID: node), challenge: 3))
    }

    func refusal(_ action: PeerSessionStateMachine.Action) -> ErrorCode? {
        if case .refuse(let error) = action { return error.code }
        return nil
    }

    /// Over TLS the proofs cover both certificates as each end saw them: a relay that terminates
    /// TLS shows each end a certificate of its own, so a hello it forwards is refused, even
    /// signed with the right secret over the right challenge.
    @Test func overTLSAHelloMustCoverTheCertificatesThisConnectionSaw() {
        let direct = ChannelBinding.of(dialer: [1, 2, 3], receiver: [4, 5, 6])
        let relayed = ChannelBinding.of(dialer: [1, 2, 3], receiver: [7, 8, 9])
        #expect(direct.count == 64 && direct != relayed && ChannelBinding.of(dialer: nil, receiver: [4]).isEmpty)
        func hello(binding: [UInt8]) -> PeerFrame {
            .hello(
                PeerHello(
                    clusterID: "c", nodeID: "node-b", epoch: 1, versionVector: [], mintingKeyFingerprint: 9,
                    proof: PeerProof.test.sign(.hello, challenge: 1_234, nodeID: "node-b", binding: binding), challenge: 3))
        }
        var session = PeerSessionStateMachine(identity: identity, challenge: 1_234, maxBatchOperations: 4)
        session.binding = direct
        #expect(session.received(hello(binding: direct)) == .welcome(peer: NodeID(trusted: "node-b"), challenge: 3))
        for binding in [relayed, []] {
            var forwarded = PeerSessionStateMachine(identity: identity, challenge: 1_234, maxBatchOperations: 4)
            forwarded.binding = direct
            #expect(refusal(forwarded.received(hello(binding: binding))) == .unauthenticated)
        }
        // The welcome's proof likewise.
        #expect(PeerProof.test.verify(
            PeerProof.test.sign(.welcome, challenge: 5, nodeID: "node-a", binding: direct), .welcome, challenge: 5, nodeID: "node-a", binding: direct))
        #expect(!PeerProof.test.verify(
            PeerProof.test.sign(.welcome, challenge: 5, nodeID: "node-a", binding: relayed), .welcome, challenge: 5, nodeID: "node-a", binding: direct))
    }

    @Test func aHelloMustSignThisConnectionsChallengeWithTheClusterSecret() {
        var good = PeerSessionStateMachine(identity: identity, challenge: 1_234, maxBatchOperations: 4)
        #expect(good.received(hello(signedBy: .test, challenge: 1_234)) == .welcome(peer: NodeID(trusted: "node-b"), challenge: 3))
        for frame in [
            hello(signedBy: PeerProof(secret: "another secret"), challenge: 1_234),
            // A proof seen on another connection, replayed.
            hello(signedBy: .test, challenge: 4_321),
            // Signed for another node ID than the hello claims.
            { () -> PeerFrame in
                guard case .hello(var hello) = hello(signedBy: .test, challenge: 1_234, node: "node-c") else { return .unknown }
                hello.nodeID = "node-b"
                return .hello(hello)
            }(),
            .hello(PeerHello(clusterID: "c", nodeID: "node-b", epoch: 1, versionVector: [], mintingKeyFingerprint: 9)),
        ] {
            var session = PeerSessionStateMachine(identity: identity, challenge: 1_234, maxBatchOperations: 4)
            #expect(refusal(session.received(frame)) == .unauthenticated, "\(frame)")
        }
    }

    @Test func theLinkRefusesAWelcomeThatDoesNotSignItsChallenge() {
        var random = SplitMix64(seed: 4)
        for signer in [PeerProof(secret: "another secret"), nil] {
            var machine = PeerLinkStateMachine.awaitingWelcome(random: &random)
            var welcome = PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)
            welcome.proof = signer?.sign(.welcome, challenge: machine.ownChallenge, nodeID: "node-b") ?? []
            guard case .closeAndRetry(_, let reason, _, _) = machine.received(.welcome(welcome), nowMillis: 0, random: &random) else {
                return #expect(Bool(false), "an unproven welcome must end the connection")
            }
            #expect(reason.contains("cluster secret"))
        }
    }

    @Test func signaturesDependOnSideChallengeNodeAndSecret() {
        let base = PeerProof.test.sign(.hello, challenge: 1, nodeID: "node-a")
        #expect(base.count == 32)
        #expect(base != PeerProof.test.sign(.welcome, challenge: 1, nodeID: "node-a"))
        #expect(base != PeerProof.test.sign(.hello, challenge: 2, nodeID: "node-a"))
        #expect(base != PeerProof.test.sign(.hello, challenge: 1, nodeID: "node-b"))
        #expect(base != PeerProof(secret: "x").sign(.hello, challenge: 1, nodeID: "node-a"))
        #expect(PeerProof.test.verify(base, .hello, challenge: 1, nodeID: "node-a"))
    }
}
