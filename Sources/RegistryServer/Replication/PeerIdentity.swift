import RegistryCore
import RegistryWire

/// What a node tells its peers about itself, and checks in what they tell it: the cluster, the
/// node, its epoch, its minting key's fingerprint, and proof of the cluster secret.
struct PeerIdentity: Sendable {
    let clusterID: String
    let nodeID: NodeID
    let epoch: UInt64
    let mintingKeyFingerprint: UInt64
    /// Signs and checks the challenges of the peer handshake.
    let proof: PeerProof
    /// Names this node's default vendor scope, a depth or a Public Suffix List
    /// (``VendorRules/defaultScopeFingerprint``: the rules themselves are the cluster's,
    /// ``VendorRuleHistory``); 0 in tests that leave it.
    var vendorRulesFingerprint: UInt64 = 0

    /// This node's own current log.
    var ownLog: LogID { LogID(origin: nodeID, epoch: epoch) }

    /// Why a peer's hello is refused, as the peer will read it; nil to welcome it. `challenge`
    /// is the one this node sent in its HelloAccepted.
    func refusal(of hello: PeerHello, challenge: UInt64, binding: [UInt8] = []) -> WireError? {
        guard hello.version.major == ProtocolVersion.current.major else {
            return WireError(
                code: .unsupportedVersion,
                message: "peer protocol version \(hello.version) is not supported; this node speaks \(ProtocolVersion.current.major).x")
        }
        guard hello.clusterID == clusterID else {
            return WireError(
                code: .wrongCluster, message: "peer \(hello.nodeID) is in cluster \(hello.clusterID.debugDescription); this node is in \(clusterID.debugDescription)")
        }
        guard hello.nodeID != nodeID.value else {
            return WireError(
                code: .duplicateNodeID, message: "peer claims node ID \(hello.nodeID), which is this node's own: two nodes share one ID")
        }
        // Checked, not made: the proof below is not checked yet, and a node keeps every node ID
        // it makes (InternedText).
        guard NodeID.isValid(hello.nodeID), hello.epoch > 0 else {
            return WireError(code: .invalidArgument, message: "peer hello names no valid node ID and epoch")
        }
        guard hello.mintingKeyFingerprint == mintingKeyFingerprint else {
            return WireError(
                code: .mintingKeyMismatch,
                message: "peer \(hello.nodeID) mints device IDs with another key: give every node the same --cluster-secret")
        }
        guard proof.verify(hello.proof, .hello, challenge: challenge, nodeID: hello.nodeID, binding: binding) else {
            return WireError(
                code: .unauthenticated,
                message: "peer \(hello.nodeID) did not prove the cluster secret over this connection's challenge"
                    + (binding.isEmpty ? "" : " and certificates (a relay in between is refused too)"))
        }
        // Checked after the proof: only a member may learn that the depths differ.
        guard hello.vendorRulesFingerprint == 0 || hello.vendorRulesFingerprint == vendorRulesFingerprint else {
            return WireError(
                code: .vendorRulesMismatch,
                message: "peer \(hello.nodeID) has another default vendor scope (fingerprint \(String(hello.vendorRulesFingerprint, radix: 16)), this node's \(String(vendorRulesFingerprint, radix: 16))): one bundle's devices would be filed under two vendors; give every node the same Public Suffix List or vendorDefaultDepth (registryctl vendor list names each node's)")
        }
        return nil
    }

    /// This node's hello, with what it holds (every log's sequence in `vector`, and how many
    /// device records and claims), signing the `challenge` of the peer's HelloAccepted and
    /// asking the peer to sign `ownChallenge`.
    func hello(
        holding vector: VersionVector, deviceRecords: Int = 0, claims: Int = 0, challenge: UInt64, ownChallenge: UInt64,
        binding: [UInt8] = []
    ) -> PeerHello {
        PeerHello(
            clusterID: clusterID, nodeID: nodeID.value, epoch: epoch, versionVector: vector.positions,
            mintingKeyFingerprint: mintingKeyFingerprint, proof: proof.sign(.hello, challenge: challenge, nodeID: nodeID.value, binding: binding),
            challenge: ownChallenge, vendorRulesFingerprint: vendorRulesFingerprint, deviceRecords: UInt64(deviceRecords),
            claims: UInt64(claims))
    }

    /// This node's welcome to a peer whose hello it accepted, with what it holds (`vector`),
    /// signing the `challenge` of the peer's hello: the proof that this node knows the cluster
    /// secret, which the peer needs before it believes anything this node says afterwards.
    func welcome(holding vector: VersionVector, challenge: UInt64, maxBatchOperations: Int, binding: [UInt8] = []) -> PeerWelcome {
        PeerWelcome(
            nodeID: nodeID.value, epoch: epoch, versionVector: vector.positions, maxBatchOperations: UInt32(maxBatchOperations),
            proof: proof.sign(.welcome, challenge: challenge, nodeID: nodeID.value, binding: binding))
    }
}

extension VersionVector {
    /// The vector as wire log positions.
    var positions: [LogPosition] {
        logs.map { LogPosition(origin: $0.log.origin.value, epoch: $0.log.epoch, sequence: $0.sequence) }
    }

    /// A vector from wire log positions, which must name valid nodes and epochs, and sequences
    /// up to ``largestSequence``. Makes their node IDs: for a peer's positions; a client's are
    /// ``fromClient(_:)``.
    init(positions: [LogPosition]) throws(WireError) {
        self.init()
        for position in positions {
            guard Self.isReadable(epoch: position.epoch, sequence: position.sequence), let origin = try? NodeID(position.origin) else {
                throw Self.invalid(position)
            }
            record(position, of: origin)
        }
    }

    /// Log positions a client sent (a causal token, a watch cursor), which must name valid
    /// nodes and epochs, read without making node IDs: a client may name any node, and a node
    /// keeps every node ID it makes (``InternedText``). `heard`: the positions of nodes this
    /// process has made the IDs of; `unheard`: the others, whose logs it holds nothing of.
    static func fromClient(_ positions: [LogPosition]) throws(WireError) -> (heard: VersionVector, unheard: [LogPosition]) {
        var heard = VersionVector()
        var unheard = [LogPosition]()
        for position in positions {
            guard isReadable(epoch: position.epoch, sequence: position.sequence) else { throw invalid(position) }
            if let origin = NodeID(known: position.origin) {
                heard.record(position, of: origin)
            } else {
                guard NodeID.isValid(position.origin) else { throw invalid(position) }
                // A position through 0 requires nothing, as in a vector.
                if position.sequence > 0 { unheard.append(position) }
            }
        }
        return (heard, unheard)
    }

    /// A log no node writes, standing for the logs of nodes a process has not heard of
    /// (``fromClient(_:)``): a vector that names it is covered by no node's.
    static let unheardLog = LogID(origin: NodeID(trusted: "(a node not heard of)"), epoch: 1)

    /// Records `position` (its epoch checked above 0) as held.
    private mutating func record(_ position: LogPosition, of origin: NodeID) {
        let log = LogID(origin: origin, epoch: position.epoch)
        recordAll(through: max(position.sequence, self[log]), in: log)
    }

    private static func invalid(_ position: LogPosition) -> WireError {
        if position.sequence > largestSequence {
            return WireError(
                code: .invalidArgument,
                message: "log position \(position.origin)/\(position.epoch) names sequence \(position.sequence), past the largest a log may reach (\(largestSequence))")
        }
        return WireError(code: .invalidArgument, message: "log position \(position.origin)/\(position.epoch) names no valid log")
    }
}
