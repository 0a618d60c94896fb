import RegistryWire
import Synchronization

/// Read your writes across nodes, for a client: the causal tokens of every answer its clients
/// received, merged, and sent as `after` with each of their requests. A node answers such a
/// request only once it holds everything an earlier answer reflected, on whichever node that
/// answer came from (a node that lags holds the request, up to its `--causal-timeout`, then
/// answers the retryable `not_caught_up`).
///
/// Give one session to the clients of several nodes (``RegistryClient/connect(to:role:clientName:token:tls:group:connectTimeout:maxCoalesced:ackReplicas:session:)``)
/// for a guarantee that spans them. A long-lived session makes every request wait for everything
/// it ever saw, which is what it promises; it drops a log once an answer shows that every member
/// holds what the session names of it (``observe(_:answering:)``), so it names the logs still
/// replicating, not every epoch of every node's start. For a guarantee per device
/// instead (the token an app keeps beside its keychain UUID), connect without a session and
/// pass each request's own token (``RegistryClient/register(_:after:)``).
public final class CausalSession: Sendable {
    private let merged: Mutex<CausalToken>

    public init(token: CausalToken = .empty) {
        merged = Mutex(token)
    }

    /// Everything the session's answers reflected.
    public var token: CausalToken {
        merged.withLock { $0 }
    }

    /// Merges an answer's token into the session.
    public func observe(_ token: CausalToken) {
        guard !token.isEmpty else { return }
        merged.withLock { $0.merge(token) }
    }

    /// Merges the token of a successful answer to a request that carried `sent`, and drops the
    /// logs the answer shows every member holds (``CausalToken/pruned(bySent:answer:)``). Not for
    /// refusals: a node that refused did not hold what the request carried.
    public func observe(_ token: CausalToken, answering sent: CausalToken) {
        guard !token.isEmpty else { return }
        merged.withLock { $0 = $0.merging(token).pruned(bySent: sent, answer: token) }
    }
}

/// A server's answer with the causal token of what it reflects.
public struct ServerReply: Sendable {
    public let body: ServerBody
    /// Send it as `after` with a later request, to any node, to be answered from at least what
    /// this answer reflected. Empty from a node without peers.
    public let token: CausalToken

    public init(body: ServerBody, token: CausalToken) {
        self.body = body
        self.token = token
    }
}
