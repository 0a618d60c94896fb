/// A peer as `--peers` names it: a host (a DNS name, resolved again on every connection, or an
/// address) and a port.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` or `[ipv6]:port`.
    init(parsing text: String) throws(SettingValueError) {
        let trimmed = text.trimmingSpaces
        let host: Substring
        let portText: Substring
        if trimmed.hasPrefix("["), let close = trimmed.firstIndex(of: "]") {
            host = trimmed[trimmed.index(after: trimmed.startIndex)..<close]
            let rest = trimmed[trimmed.index(after: close)...]
            guard rest.hasPrefix(":") else { throw SettingValueError("peer \(text.debugDescription) is not [address]:port") }
            portText = rest.dropFirst()
        } else {
            guard let colon = trimmed.lastIndex(of: ":") else {
                throw SettingValueError("peer \(text.debugDescription) is not host:port")
            }
            host = trimmed[..<colon]
            portText = trimmed[trimmed.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "," }) else {
            throw SettingValueError("peer \(text.debugDescription) names no host")
        }
        guard let port = Int(portText), (1...65_535).contains(port) else {
            throw SettingValueError("peer \(text.debugDescription) has no port in 1...65535")
        }
        self.init(host: String(host), port: port)
    }

    /// A comma-separated list; empty text is no peers.
    static func list(parsing text: String) throws(SettingValueError) -> [PeerAddress] {
        var peers = [PeerAddress]()
        for item in text.split(separator: ",") where !String(item).trimmingSpaces.isEmpty {
            let peer = try PeerAddress(parsing: String(item))
            if !peers.contains(peer) { peers.append(peer) }
        }
        return peers
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
