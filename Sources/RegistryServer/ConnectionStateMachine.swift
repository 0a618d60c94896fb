import RegistryWire

/// One connection's protocol state as a plain value: handshake, in-flight accounting for
/// backpressure, and draining. Every event returns the action the handler must carry out.
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
        /// Hand the frame to the engine.
        case dispatch
        /// Send this connection-level error, then close.
        case failConnection(WireError)
        /// Drop it: the connection is closing.
        case ignore
    }

    enum ReadAction: Equatable {
        case read
        case hold
    }

    private(set) var state = State.awaitingHello
    private(set) var inFlight = 0
    private var readHeld = false
    let maxInFlight: Int

    init(maxInFlight: Int) {
        self.maxInFlight = maxInFlight
    }

    mutating func frameReceived(_ frame: ClientFrame) -> FrameAction {
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
                state = .ready
                return .acceptHello
            case .peer:
                return fail(.unsupportedRole, "this node does not serve peer replication")
            case .unknown(let value):
                return fail(.unsupportedRole, "role \(value) is not client (1) or admin (2)")
            }
        case .ready:
            if case .hello = frame.body { return fail(.handshakeRequired, "the handshake is already done") }
            inFlight += 1
            return .dispatch
        }
    }

    private mutating func fail(_ code: ErrorCode, _ message: String) -> FrameAction {
        state = .closed
        return .failConnection(WireError(code: code, message: message))
    }

    /// The channel wants to read more. Hold while too many requests are unanswered.
    mutating func readRequested() -> ReadAction {
        if inFlight >= maxInFlight || state == .draining {
            readHeld = true
            return .hold
        }
        return .read
    }

    /// `count` responses were written. Returns whether to resume a held read, and whether the
    /// connection is now idle while draining and should close.
    mutating func answered(_ count: Int) -> (resumeRead: Bool, close: Bool) {
        inFlight -= count
        if state == .draining { return (false, inFlight == 0) }
        if readHeld, inFlight < maxInFlight, state == .ready {
            readHeld = false
            return (true, false)
        }
        return (false, false)
    }

    /// Shutdown began: stop taking requests. True when the connection can close at once.
    mutating func drain() -> Bool {
        switch state {
        case .closed: return false
        case .draining: return inFlight == 0
        case .awaitingHello, .ready:
            state = .draining
            return inFlight == 0
        }
    }

    mutating func closed() {
        state = .closed
    }
}
