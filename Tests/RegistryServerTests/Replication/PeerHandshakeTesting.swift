import RegistryCore
import RegistryWire
@testable import RegistryServer

/// The peer handshake's proofs, for suites that drive the peer state machines by hand: one test
/// secret, and sessions that always send challenge ``PeerSessionStateMachine/testChallenge``.
extension PeerProof {
    static let test = PeerProof(secret: "test cluster secret")
}

extension PeerIdentity {
    init(clusterID: String, nodeID: NodeID, epoch: UInt64, mintingKeyFingerprint: UInt64) {
        self.init(clusterID: clusterID, nodeID: nodeID, epoch: epoch, mintingKeyFingerprint: mintingKeyFingerprint, proof: .test)
    }

    /// This node's hello to a session of ``PeerSessionStateMachine/testChallenge``.
    func hello(holding vector: VersionVector) -> PeerHello {
        hello(holding: vector, challenge: PeerSessionStateMachine.testChallenge, ownChallenge: 5)
    }
}

extension PeerSessionStateMachine {
    static let testChallenge: UInt64 = 77

    init(identity: PeerIdentity, maxBatchOperations: Int, removed: Set<NodeID> = []) {
        self.init(identity: identity, challenge: Self.testChallenge, maxBatchOperations: maxBatchOperations, removed: removed)
    }
}

extension PeerHello {
    /// The hello of `node`, signed for a session of ``PeerSessionStateMachine/testChallenge``.
    func withNode(_ node: String) -> PeerHello {
        var hello = self
        hello.nodeID = node
        hello.proof = PeerProof.test.sign(.hello, challenge: PeerSessionStateMachine.testChallenge, nodeID: node)
        return hello
    }
}

extension PeerLinkStateMachine {
    init(
        ownNodeID: NodeID, ownInstanceID: UInt64, window: Int, answerTimeoutMillis: UInt64 = 10_000, installTimeoutMillis: UInt64 = 600_000
    ) {
        self.init(
            ownNodeID: ownNodeID, ownInstanceID: ownInstanceID, proof: .test, window: window, answerTimeoutMillis: answerTimeoutMillis,
            installTimeoutMillis: installTimeoutMillis)
    }

    /// The answer to the client hello, with a fixed challenge for the peer to sign.
    mutating func received(_ frame: ServerFrame, random: inout some RandomNumberGenerator) -> Action {
        received(frame, challenge: 0x1D, random: &random)
    }

    /// A link of node-a that connected and had its hello accepted by node-b: it awaits the welcome.
    static func awaitingWelcome(
        window: Int = 2, answerTimeoutMillis: UInt64 = 10_000, installTimeoutMillis: UInt64 = 600_000, limits: Limits = .default,
        random: inout some RandomNumberGenerator
    ) -> PeerLinkStateMachine {
        var machine = PeerLinkStateMachine(
            ownNodeID: NodeID(trusted: "node-a"), ownInstanceID: 7, window: window, answerTimeoutMillis: answerTimeoutMillis,
            installTimeoutMillis: installTimeoutMillis)
        _ = machine.start()
        _ = machine.connected()
        let accepted = HelloAccepted(version: .current, nodeID: "node-b", clusterID: "c", serverVersion: "t", limits: limits, instanceID: 9)
        _ = machine.received(ServerFrame(requestID: 0, body: .helloAccepted(accepted)), random: &random)
        return machine
    }

    /// `welcome` signed as a receiver holding the test secret signs it, for this link's hello.
    func signed(_ welcome: PeerWelcome) -> PeerFrame {
        var signed = welcome
        signed.proof = PeerProof.test.sign(.welcome, challenge: ownChallenge, nodeID: welcome.nodeID)
        return .welcome(signed)
    }
}
