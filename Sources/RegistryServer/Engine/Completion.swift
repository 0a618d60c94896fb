import RegistryWire

extension RegistryEngine {
    /// Calls back with the answers to one submitted group of requests, in request order.
    public typealias Delivery = @Sendable (Answers) -> Void

    /// Answers decided and, where they changed state, durable: ready to send. They are put in
    /// wire form (UUID text and all) by ``frames``, which the receiver calls on its own thread,
    /// so neither the engine's lock nor the log writer pays for it.
    public struct Answers: Sendable {
        let requestIDs: [UInt64]
        let decisions: [NodeState.Decision]
        /// What the answers reflect (one token for the group: see ``ClientRequests/submit(_:resolver:access:deliver:causalDeadline:refusals:caughtUp:)``).
        var token: CausalToken = .empty

        public var count: Int { requestIDs.count }

        public var frames: [ServerFrame] {
            zip(requestIDs, decisions).map { ServerFrame(requestID: $0, body: $1.body, token: token) }
        }
    }

    /// What waits for the operations it saw to become durable, by who asked. Only a client's
    /// group is answered with frames and counted as requests.
    enum Completion: Sendable {
        /// A client's group of requests.
        case client(Waiter)
        /// A peer's batch: what this node then holds of the batch's logs, or why it was refused.
        case peerBatch(Result<[LogPosition], WireError>, deliver: @Sendable (Result<[LogPosition], WireError>) -> Void)
        /// A change of this node's own (its membership): `done` runs once it is durable, or once
        /// the log has failed.
        case own(done: @Sendable () -> Void)
    }

    /// A client's answers, decided under the lock, waiting for their operations to become durable.
    struct Waiter: Sendable {
        let answers: Answers
        let deliver: Delivery
        /// Peers that must hold the write before the answer goes (`--ack-replicas`), and the last
        /// sequence of this node's own log that the write made; 0 and 0 for most.
        var replicas = 0
        var ownThrough: UInt64 = 0
        /// When the requests were submitted, in uptime nanoseconds, for the request latency
        /// metric; 0 for answers that are not a client's.
        var submittedNanos: UInt64 = 0
    }

    /// A group of requests held until the node holds what their causal tokens name
    /// (``CausalHolding``). The frames refused before it was held are kept as their refusals,
    /// their bodies dropped: a refused batch decodes to many times its frame's bytes, and held
    /// with its group it pinned that memory for the whole wait.
    struct CausalWaiter: Sendable {
        let frames: [ClientFrame]
        /// The frames refused before the group was held, by index into `frames` (whose bodies
        /// there are ``ClientBody/unknown``), with their refusals.
        var refusals: [(index: Int, error: WireError)] = []
        let access: ConnectionAccess
        let deliver: Delivery
    }
}
