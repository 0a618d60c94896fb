import NIOSSL

/// TLS for a client's connection to a node that runs with `--tls-cert`: the certificates the
/// node's must chain to, checked against the host name dialled (or, for an IP address, the
/// address). Build it once and pass it to every ``RegistryClient/connect(to:role:clientName:token:tls:group:connectTimeout:maxCoalesced:ackReplicas:)``.
public struct ClientTLS: Sendable {
    let context: NIOSSLContext

    /// Trusts the CA certificates in the PEM file `caFile`, or the system's roots when nil.
    public init(caFile: String? = nil) throws(RegistryClientError) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        do {
            if let caFile { configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile)) }
            context = try NIOSSLContext(configuration: configuration)
        } catch {
            throw .tls("cannot use \(caFile ?? "the system's trust roots"): \(error)")
        }
    }

    /// The handler for a connection to `host`: SNI and name checks for a DNS name; an IP
    /// address is checked against the certificate's IP addresses instead.
    func handler(for host: String) throws -> NIOSSLClientHandler {
        let isAddress = host.contains(":") || host.split(separator: ".").allSatisfy { UInt8($0) != nil }
        return try NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : host)
    }
}

extension RegistryClientError {
    /// What an error a connection's pipeline caught means to its caller: a TLS failure (a
    /// certificate, or a handshake), or the connection closed (a peer's end that went without
    /// TLS's close_notify, as a node that crashed does, is a closed connection, not a TLS failure).
    static func caught(_ error: any Error) -> RegistryClientError {
        if let ssl = error as? NIOSSLError, case .uncleanShutdown = ssl {
            return .connectionClosed("the server closed the connection without ending TLS: \(error)")
        }
        if error is NIOSSLError || error is BoringSSLError { return .tls("\(error)") }
        return .connectionClosed("\(error)")
    }
}
