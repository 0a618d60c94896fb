import NIOSSL

/// TLS for a node's connections, loaded once at start-up from `--tls-cert`, `--tls-key` and
/// `--tls-ca`:
///
/// - ``server`` serves clients and peers on the node's port. It asks for a client certificate
///   and, when one is presented, verifies it against the CA; a connection that says hello as a
///   peer must have presented one (mutual TLS), a client need not (it has its token).
/// - ``peerClient`` dials peers, presenting this node's certificate and verifying theirs against
///   the CA. Peers check that a certificate chains to the cluster's CA, not the host name it
///   was dialled by: membership is holding a certificate the cluster's CA signed.
public struct NodeTLS: Sendable {
    let server: NIOSSLContext
    let peerClient: NIOSSLContext
    /// This node's own certificate (DER), for the peers' ``ChannelBinding``.
    let certificate: [UInt8]

    /// Nil when TLS is off (no `--tls-cert`).
    public static func load(_ configuration: NodeConfiguration) throws(ConfigurationError) -> NodeTLS? {
        guard let certificatePath = configuration.tlsCertificate else { return nil }
        guard let keyPath = configuration.tlsKey else {
            throw .invalidValue(source: "--tls-cert", reason: "needs --tls-key, the certificate's private key")
        }
        guard let caPath = configuration.tlsCA else {
            throw .invalidValue(source: "--tls-cert", reason: "needs --tls-ca, the CA that signs the cluster's certificates (peers verify each other with it)")
        }
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        let roots: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw .invalidValue(source: "--tls-cert", reason: "cannot read a PEM certificate from \(certificatePath): \(error)")
        }
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw .invalidValue(source: "--tls-key", reason: "cannot read a PEM private key from \(keyPath): \(error)")
        }
        do {
            roots = try NIOSSLCertificate.fromPEMFile(caPath)
        } catch {
            throw .invalidValue(source: "--tls-ca", reason: "cannot read PEM certificates from \(caPath): \(error)")
        }
        guard !chain.isEmpty, !roots.isEmpty else {
            throw .invalidValue(source: chain.isEmpty ? "--tls-cert" : "--tls-ca", reason: "the file holds no certificate")
        }
        var server = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        server.minimumTLSVersion = .tlsv12
        server.certificateVerification = .optionalVerification
        server.trustRoots = .certificates(roots)
        var client = TLSConfiguration.makeClientConfiguration()
        client.minimumTLSVersion = .tlsv12
        client.certificateChain = chain.map { .certificate($0) }
        client.privateKey = .privateKey(key)
        client.trustRoots = .certificates(roots)
        client.certificateVerification = .noHostnameVerification
        do {
            return NodeTLS(
                server: try NIOSSLContext(configuration: server), peerClient: try NIOSSLContext(configuration: client),
                certificate: try chain[0].toDERBytes())
        } catch {
            throw .invalidValue(source: "--tls-key", reason: "the key does not fit the certificate, or TLS cannot start: \(error)")
        }
    }
}
