import Crypto

/// What ties a peer's proof of the cluster secret to one TLS connection: SHA-256 of the
/// dialer's certificate, then SHA-256 of the receiver's (DER), as each end saw them, signed into
/// both proofs (``PeerProof``). A relay that terminates TLS presents a certificate of its own to
/// each end, so the proofs it forwards do not verify. swift-nio-ssl does not export keying
/// material (RFC 9266's `tls-exporter`), so the two certificates stand in for the channel.
/// Empty without TLS: then a relay on the path can forward the handshake (docs/security.md).
enum ChannelBinding {
    static func of(dialer: [UInt8]?, receiver: [UInt8]?) -> [UInt8] {
        guard let dialer, let receiver else { return [] }
        return Array(SHA256.hash(data: dialer)) + Array(SHA256.hash(data: receiver))
    }
}
