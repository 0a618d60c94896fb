import Crypto

/// The key with which peers prove to each other that they hold the cluster secret, fresh for
/// every connection: each signs the random challenge the other drew (HelloAccepted.challenge,
/// PeerHello.challenge), so a proof seen on the wire is worth nothing on another connection.
/// Derived from `--cluster-secret` as HMAC-SHA256 of "registry peer key v1".
struct PeerProof: Sendable {
    enum Side: String {
        /// The dialling node's PeerHello.
        case hello
        /// The answering node's PeerWelcome.
        case welcome
    }

    private let key: SymmetricKey

    init(secret: String) {
        key = SymmetricKey(data: Array(HMAC<SHA256>.authenticationCode(for: Array("registry peer key v1".utf8), using: SymmetricKey(data: Array(secret.utf8)))))
    }

    /// HMAC-SHA256 of the side's name, a 0 byte, the challenge as 8 bytes big-endian, the
    /// signing node's ID, and the connection's ``ChannelBinding`` (nothing without TLS).
    func sign(_ side: Side, challenge: UInt64, nodeID: String, binding: [UInt8] = []) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Self.message(side, challenge: challenge, nodeID: nodeID, binding: binding), using: key))
    }

    /// Whether `proof` is the signature of (side, challenge, nodeID, binding), compared in
    /// constant time.
    func verify(_ proof: [UInt8], _ side: Side, challenge: UInt64, nodeID: String, binding: [UInt8] = []) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(
            proof, authenticating: Self.message(side, challenge: challenge, nodeID: nodeID, binding: binding), using: key)
    }

    private static func message(_ side: Side, challenge: UInt64, nodeID: String, binding: [UInt8]) -> [UInt8] {
        Array(side.rawValue.utf8) + [0] + withUnsafeBytes(of: challenge.bigEndian) { Array($0) } + Array(nodeID.utf8) + binding
    }
}
