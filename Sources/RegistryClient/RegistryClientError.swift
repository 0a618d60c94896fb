import RegistryWire

/// Why a client call failed.
public enum RegistryClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The endpoint text is not `host:port`.
    case invalidEndpoint(String)
    /// No connection could be made (refused, unresolvable, timed out).
    case unreachable(endpoint: String, reason: String)
    /// The server answered with a typed error.
    case server(WireError)
    /// The connection closed before the answer arrived.
    case connectionClosed(String)
    /// The server sent something this client cannot use.
    case unexpectedResponse(String)
    /// TLS could not be set up, or its handshake failed (an untrusted or misnamed certificate,
    /// or a node that does not speak TLS).
    case tls(String)
    /// The calling task was cancelled before the answer arrived. The request may still be
    /// carried out (a write made); a call's connection stays usable (a cancelled connect leaves
    /// none).
    case cancelled

    public var description: String {
        switch self {
        case .invalidEndpoint(let text): return "invalid endpoint \"\(text)\": expected host:port, or [IPv6]:port"
        case .unreachable(let endpoint, let reason): return "cannot reach \(endpoint): \(reason)"
        case .server(let error): return "server error \(error.code.name): \(error.message)"
        case .connectionClosed(let reason): return "connection closed: \(reason)"
        case .unexpectedResponse(let what): return "unexpected response: \(what)"
        case .tls(let reason): return "TLS failed: \(reason)"
        case .cancelled: return "cancelled before the answer arrived"
        }
    }
}

/// A server address, `host:port`.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (`[v6]:port` for IPv6 literals) by the project's one rule
    /// (``HostPort``).
    public init(parsing text: String) throws(RegistryClientError) {
        do {
            let (host, port) = try HostPort.parse(text)
            self.init(host: host, port: port)
        } catch {
            throw .invalidEndpoint(text)
        }
    }

    public var description: String { HostPort.text(host: host, port: port) }
}
