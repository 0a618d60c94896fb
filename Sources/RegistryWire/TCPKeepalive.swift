#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// TCP keepalive on every connection of the protocol, both ends: a peer whose host died, or
/// whose network dropped the path without a reset, is found gone after about two minutes of
/// silence (60 s idle, then 6 probes 10 s apart; Linux, elsewhere the system's timings) and the
/// connection closed. With bytes in flight that the peer never acknowledges, TCP's retransmission
/// timeout (about 15 minutes on Linux) ends it instead. Without it such a
/// connection lasts for ever: a node counts it against `--max-connections`, and a client with
/// no answer timeout waits on it for good. A live peer answers the probes from its kernel,
/// however idle the protocol is.
public enum TCPKeepalive {
    public static let idleSeconds = 60
    public static let intervalSeconds = 10
    public static let probes = 6

    /// The socket options that set it, as channel options.
    public static let options: [(option: ChannelOptions.Types.SocketOption, value: SocketOptionValue)] = {
        var options: [(option: ChannelOptions.Types.SocketOption, value: SocketOptionValue)] = [(.init(level: .socket, name: .so_keepalive), 1)]
        #if os(Linux)
        options += [
            (.init(level: .tcp, name: .init(rawValue: TCP_KEEPIDLE)), idleSeconds),
            (.init(level: .tcp, name: .init(rawValue: TCP_KEEPINTVL)), intervalSeconds),
            (.init(level: .tcp, name: .init(rawValue: TCP_KEEPCNT)), probes),
        ]
        #endif
        return options
    }()
}

extension NIOClientTCPBootstrapProtocol {
    /// This bootstrap with ``TCPKeepalive`` on its connection.
    public func keepalive() -> Self {
        TCPKeepalive.options.reduce(self) { $0.channelOption($1.option, value: $1.value) }
    }
}
