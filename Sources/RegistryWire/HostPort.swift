/// The one rule by which the project reads an address: a client's endpoint, a peer in
/// `--peers`, an advertised address. `host:port`, or `[address]:port` for an IPv6 literal (an
/// IPv6 address without brackets is refused: its last colon cannot be told from the port's).
/// Spaces around the text are ignored; the host is not empty and holds no space or comma; the
/// port is in 1...65535.
public enum HostPort {
    /// Why text is not an address.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// No `:port` after the host (or after `]`).
        case noPort
        /// Nothing, a space or a comma where the host should be, or an IPv6 literal without brackets.
        case badHost
        /// The port is not a number in 1...65535.
        case badPort

        public var description: String {
            switch self {
            case .noPort: return "is not host:port (or [IPv6]:port)"
            case .badHost: return "names no usable host (an IPv6 address needs brackets: [::1]:7400)"
            case .badPort: return "has no port in 1...65535"
            }
        }
    }

    /// The host (without brackets) and port of `text`.
    public static func parse(_ text: String) throws(Problem) -> (host: String, port: Int) {
        let clean = trimmingBlanks(text)
        let host: Substring
        let portText: Substring
        if clean.hasPrefix("[") {
            guard let close = clean.firstIndex(of: "]") else { throw .badHost }
            host = clean[clean.index(after: clean.startIndex)..<close]
            let rest = clean[clean.index(after: close)...]
            guard rest.hasPrefix(":") else { throw .noPort }
            portText = rest.dropFirst()
        } else {
            guard let colon = clean.lastIndex(of: ":") else { throw .noPort }
            host = clean[..<colon]
            guard !host.contains(":") else { throw .badHost }
            portText = clean[clean.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "," || $0 == "[" || $0 == "]" }) else { throw .badHost }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(portText), (1...65_535).contains(port) else { throw .badPort }
        return (String(host), port)
    }

    /// `text` without the spaces and tabs around it, as ``parse(_:)`` reads it.
    public static func trimmingBlanks(_ text: String) -> String {
        var clean = Substring(text)
        while let first = clean.first, first == " " || first == "\t" { clean.removeFirst() }
        while let last = clean.last, last == " " || last == "\t" { clean.removeLast() }
        return String(clean)
    }

    /// `host:port`, with brackets around an IPv6 host: what ``parse(_:)`` reads back.
    public static func text(host: String, port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
