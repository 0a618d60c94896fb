import RegistryWire

/// A peer as `--peers` names it: a host (a DNS name, resolved again on every connection, or an
/// address) and a port.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` or `[ipv6]:port` by the project's one rule (``HostPort``).
    init(parsing text: String) throws(SettingValueError) {
        do {
            let (host, port) = try HostPort.parse(text)
            self.init(host: host, port: port)
        } catch {
            throw SettingValueError("peer \(HostPort.trimmingBlanks(text).debugDescription) \(error)")
        }
    }

    /// A comma-separated list; empty text is no peers.
    static func list(parsing text: String) throws(SettingValueError) -> [PeerAddress] {
        var peers = [PeerAddress]()
        for item in text.split(separator: ",") where !HostPort.trimmingBlanks(String(item)).isEmpty {
            let peer = try PeerAddress(parsing: String(item))
            if !peers.contains(peer) { peers.append(peer) }
        }
        return peers
    }

    public var description: String { HostPort.text(host: host, port: port) }
}
