import RegistryAuth
import RegistryWire

/// One connection's protocol state as a plain value: handshake and its token, backpressure
/// (through ``RequestFlowControl``), and draining. Every event returns the action the handler must carry
/// out.
struct ConnectionStateMachine {
    enum State: Equatable {
        case awaitingHello
        case ready
        /// No new requests; close once everything in flight is answered.
        case draining
        case closed
    }

    enum FrameAction: Equatable {
        /// Send HelloAccepted.
        case acceptHello
        /// Send HelloAccepted, then hand the connection to the peer protocol (peer.proto).
        case acceptPeer
        /// Hand the frame to the engine.
        case dispatch
        /// Hand the connection to a watch stream (watch.proto): it takes no other request.
        case watch
        /// Send this connection-level error, then close.
        case failConnection(WireError)
        /// Drop it: the connection is closing.
        case ignore
    }

    private(set) var state = State.awaitingHello
    /// When the next request may be taken and reads may go on.
    private(set) var flow: RequestFlowControl
    /// Verifies the hello's token; nil: the node takes no tokens and every client may do all.
    private let tokens: TokenKey?
    /// What the client may do, once its hello is accepted.
    private(set) var access = ConnectionAccess.unrestricted

    /// A peer's hello needs a TLS client certificate that the cluster's CA signed.
    private let peersNeedCertificate: Bool

    init(maxInFlight: Int, tokens: TokenKey? = nil, peersNeedCertificate: Bool = false) {
        self.flow = RequestFlowControl(maxInFlight: maxInFlight)
        self.tokens = tokens
        self.peersNeedCertificate = peersNeedCertificate
    }

    var inFlight: Int { flow.inFlight }

    /// Whether the handler may cut the next frame from what it has read and feed it here.
    var takesFrames: Bool {
        switch state {
        case .awaitingHello: return true
        case .ready: return flow.admits
        case .draining, .closed: return false
        }
    }

    /// `nowSeconds` is the wall clock (seconds since the Unix epoch), against which a token's
    /// expiry is checked at the hello and at every request; `certified` says whether TLS verified
    /// a client certificate on this connection.
    mutating func frameReceived(_ frame: ClientFrame, nowSeconds: UInt64, certified: Bool) -> FrameAction {
        switch state {
        case .closed, .draining:
            return .ignore
        case .awaitingHello:
            guard case .hello(let hello) = frame.body else {
                return fail(.handshakeRequired, "the first frame must be a Hello")
            }
            guard hello.version.major == ProtocolVersion.current.major else {
                return fail(
                    .unsupportedVersion,
                    "protocol version \(hello.version) is not supported; this node speaks \(ProtocolVersion.current.major).x")
            }
            switch hello.role {
            case .client, .admin:
                if let tokens {
                    do {
                        access = .token(try tokens.verify(hello.token, now: nowSeconds))
                    } catch {
                        return fail(.unauthenticated, error.description)
                    }
                }
                state = .ready
                return .acceptHello
            case .peer:
                if peersNeedCertificate && !certified {
                    return fail(.unauthenticated, "a peer must present a TLS client certificate that the cluster's CA signed (--tls-cert)")
                }
                // From here the peer protocol's own state machine has the connection.
                state = .closed
                return .acceptPeer
            case .unknown(let value):
                return fail(.unsupportedRole, "role \(value) is not client (1), admin (2) or peer (3)")
            }
        case .ready:
            if case .hello = frame.body { return fail(.handshakeRequired, "the handshake is already done") }
            if case .token(let token) = access, nowSeconds >= token.expiresAt {
                return fail(.unauthenticated, TokenError.expired(at: token.expiresAt).description)
            }
            if case .watch = frame.body {
                guard flow.inFlight == 0 else {
                    return fail(.invalidArgument, "a watch needs a connection of its own: send it with no request in flight")
                }
                // From here the watch stream has the connection.
                state = .closed
                return .watch
            }
            flow.took()
            return .dispatch
        }
    }

    private mutating func fail(_ code: ErrorCode, _ message: String) -> FrameAction {
        state = .closed
        return .failConnection(WireError(code: code, message: message))
    }

    /// The channel wants to read more: true to read now, false to hold the read (see
    /// ``takeHeldRead()``).
    mutating func readRequested() -> Bool {
        flow.readRequested(open: state == .awaitingHello || state == .ready)
    }

    /// True, once, when a read held by ``readRequested()`` may go ahead.
    mutating func takeHeldRead() -> Bool {
        state == .ready && flow.takeHeldRead()
    }

    /// `count` answers were handed to the channel. Returns whether the connection is now idle
    /// while draining, and should close.
    mutating func answered(_ count: Int) -> Bool {
        flow.answered(count)
        return state == .draining && flow.inFlight == 0
    }

    mutating func writabilityChanged(writable: Bool) {
        flow.writabilityChanged(writable: writable)
    }

    /// Shutdown began: stop taking requests. True when the connection can close at once.
    mutating func drain() -> Bool {
        switch state {
        case .closed: return false
        case .draining: return flow.inFlight == 0
        case .awaitingHello, .ready:
            state = .draining
            return flow.inFlight == 0
        }
    }

    mutating func closed() {
        state = .closed
    }
}
