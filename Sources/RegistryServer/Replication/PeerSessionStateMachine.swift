import NIOCore
import RegistryCore
import RegistryWire

/// The receiving side of one peer connection, as a plain value: it checks the peer's hello,
/// then takes batches of operations, decoded and checked, one at a time in order. Every event
/// returns what the handler must do. A refusal ends the session.
struct PeerSessionStateMachine {
    enum State: Equatable {
        case awaitingHello
        /// Welcomed `peer`; batches flow.
        case streaming(peer: NodeID)
        case closed
    }

    enum Action: Equatable {
        /// Send a ``PeerWelcome`` (with what this node holds) to `peer`, signing its `challenge`.
        case welcome(peer: NodeID, challenge: UInt64)
        /// Make these operations durable and applied, then acknowledge `batchID`.
        case apply(batchID: UInt64, operations: [LoggedOperation])
        /// Write this chunk of a snapshot transfer (the first one `starts` it, truncating what an
        /// earlier transfer left), acknowledge it, and once it is the `last`, check and install the
        /// snapshot, then acknowledge that.
        case storeChunk(SnapshotChunk, starts: Bool, last: Bool)
        /// Send this refusal, count it, and close.
        case refuse(WireError)
        /// Send a ``PeerWelcome`` to `peer`, signing its `challenge`, then this refusal, and close:
        /// the welcome proves this node, and a dialler believes a refusal that changes its state
        /// (``ErrorCode/nodeRemoved``) only from a peer that proved itself.
        case welcomeThenRefuse(peer: NodeID, challenge: UInt64, WireError)
        /// The peer ended the session with a refusal of its own: close, answering nothing.
        case close
        /// The session is over: drop the frame.
        case ignore
    }

    private(set) var state = State.awaitingHello
    let identity: PeerIdentity
    /// The most operations one batch may hold.
    let maxBatchOperations: Int
    /// The connection's ``ChannelBinding``, which the peer's proof must cover (empty without TLS).
    var binding: [UInt8] = []
    /// Nodes removed from the cluster, refused for good.
    let removed: Set<NodeID>
    /// The snapshot transfer under way, if any.
    private(set) var reception: SnapshotReception?

    /// The challenge this node sent in its HelloAccepted, which the peer's hello must sign.
    let challenge: UInt64
    /// Decodes the session's operations, remembering the texts they repeat.
    private var decoder = OperationDecoder()
    /// What the peer's hello said it holds, until the first batch of operations takes it
    /// (``holdingsBeforeFirstBatch()``).
    private var peerHoldings: PeerHoldings?

    init(identity: PeerIdentity, challenge: UInt64, maxBatchOperations: Int, removed: Set<NodeID> = []) {
        self.identity = identity
        self.challenge = challenge
        self.maxBatchOperations = maxBatchOperations
        self.removed = removed
    }

    /// A frame's payload. While streaming, a batch is read straight from its bytes into
    /// operations by the session's decoder (``OperationDecoder/batch(inFrame:limit:)``); any other
    /// frame, and a batch that reader leaves, is decoded by protobuf-c and taken as
    /// ``received(_:)`` takes it, whose checks and refusals then decide. Throws the codec's
    /// error for bytes that are not a PeerFrame.
    mutating func received(payload: ByteBuffer) throws(CodecError) -> Action {
        if case .streaming = state {
            let limit = maxBatchOperations
            if let batch = payload.withUnsafeReadableBytes({ decoder.batch(inFrame: $0, limit: limit) }) {
                return .apply(batchID: batch.batchID, operations: batch.operations)
            }
        }
        return received(try PeerFrame(decoding: payload))
    }

    mutating func received(_ frame: PeerFrame) -> Action {
        switch (state, frame) {
        case (.closed, _):
            return .ignore
        case (.awaitingHello, .hello(let hello)):
            if let refusal = identity.refusal(of: hello, challenge: challenge, binding: binding) { return refuse(refusal) }
            let peer = NodeID(trusted: hello.nodeID)
            guard !removed.contains(peer) else {
                state = .closed
                return .welcomeThenRefuse(peer: peer, challenge: hello.challenge, Self.removedRefusal(of: peer))
            }
            state = .streaming(peer: peer)
            peerHoldings = PeerHoldings(hello)
            return .welcome(peer: peer, challenge: hello.challenge)
        case (.streaming, .batch(let batch)):
            guard batch.operations.count <= maxBatchOperations else {
                return refuse(
                    WireError(
                        code: .batchTooLarge,
                        message: "a batch of \(batch.operations.count) operations exceeds the limit of \(maxBatchOperations)"))
            }
            var operations = [LoggedOperation]()
            operations.reserveCapacity(batch.operations.count)
            for operation in batch.operations {
                do {
                    operations.append(try operation.decoded(using: &decoder))
                } catch {
                    return refuse(WireError(code: .invalidOperation, message: "batch \(batch.batchID): \(error)"))
                }
            }
            return .apply(batchID: batch.batchID, operations: operations)
        case (.streaming, .snapshotChunk(let chunk)):
            do throws(WireError) {
                let starts = reception == nil || chunk.offset == 0 && chunk.transferID != reception?.transferID
                if starts { reception = try SnapshotReception(first: chunk) }
                let last = try reception!.accept(chunk)
                if last { reception = nil }
                return .storeChunk(chunk, starts: starts, last: last)
            } catch {
                return refuse(error)
            }
        case (.streaming, .refusal), (.awaitingHello, .refusal):
            state = .closed
            return .close
        case (.awaitingHello, _):
            return refuse(WireError(code: .handshakeRequired, message: "the first peer frame must be a PeerHello"))
        case (.streaming, _):
            return refuse(
                WireError(code: .unexpectedPeerFrame, message: "a sender may send only OperationBatch and SnapshotChunk after its hello"))
        }
    }

    /// What the peer's hello said it holds, once, for the handler to size the state's indexes
    /// by before it applies the first batch (``RegistryEngine/sizeIndexes(toCatchUpWith:holding:)``);
    /// nil after that, and when the hello said nothing of it. Not at the hello: a peer whose
    /// journal no longer holds what this node lacks sends a snapshot first, and installing it
    /// builds a state of its own size, which indexes sized before would only have doubled in
    /// memory meanwhile.
    mutating func holdingsBeforeFirstBatch() -> PeerHoldings? {
        defer { peerHoldings = nil }
        return peerHoldings
    }

    /// The state refused a batch (a gap, clock skew): the session ends.
    mutating func refused(_ error: WireError) -> Action {
        refuse(error)
    }

    /// What a removed peer is told, at its hello or once its removal arrives while it streams.
    static func removedRefusal(of peer: NodeID) -> WireError {
        WireError(code: .nodeRemoved, message: "\(peer) was removed from the cluster; start it with a new node ID")
    }

    private mutating func refuse(_ error: WireError) -> Action {
        state = .closed
        return .refuse(error)
    }
}
