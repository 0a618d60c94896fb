import RegistryCore
import RegistryWire

/// The sending side of the link to one configured peer address, as a plain value: connect, say
/// hello, learn what the receiver holds, stream, and on any failure wait (``Backoff``) and start
/// over. Every event returns what the shell must do. The random source for the backoff's jitter
/// is passed in, so a seeded run is deterministic.
struct PeerLinkStateMachine {
    enum State: Equatable {
        /// Not connected; `retryInMillis` once a failure scheduled a retry.
        case disconnected
        case connecting
        /// Connected; the client Hello is sent, its HelloAccepted awaited.
        case awaitingAccept
        /// PeerHello sent to `peer`; its welcome awaited.
        case awaitingWelcome(peer: NodeID)
        case streaming(peer: NodeID)
        /// The address answered as this node's own: nothing to send. Checked again after
        /// ``ownAddressRecheckMillis`` (``retryDue()``), since the answer proves nothing: whatever
        /// answers at the address can replay this node's instance ID, which any client learns.
        case stopped
    }

    enum Action: Equatable {
        /// Open a connection (resolving the address again).
        case connect
        /// Send the client Hello with role peer.
        case sendClientHello
        /// Send this node's PeerHello, signing the receiver's `challenge` and asking it to sign
        /// `ownChallenge`.
        case sendPeerHello(challenge: UInt64, ownChallenge: UInt64)
        /// Send what ``cursor`` says the receiver lacks, while it allows.
        case stream
        /// Close the connection (if open); call ``retryDue()`` after `retryInMillis`. `reason`
        /// is for the log, `refusal` is what the receiver said, if anything. `proven`: the
        /// receiver had proved the cluster secret (its welcome) before it refused, so the shell
        /// may act on the refusal (a removal, a snapshot refused for good); anything that answers
        /// at a peer's address can send an unproven one.
        case closeAndRetry(retryInMillis: UInt64, reason: String, refusal: WireError?, proven: Bool)
        /// Close: the address answered as this node's own. Call ``retryDue()`` after
        /// `recheckInMillis` to check again; `first` is true when it was not known for this node's
        /// own before (for the log).
        case ownAddress(recheckInMillis: UInt64, first: Bool)
        case none
    }

    private(set) var state = State.disconnected

    /// The state as a link's status names it (``PeerLinkStatus/state``): a link sending a
    /// snapshot streams no operations.
    var statusName: String {
        switch state {
        case .disconnected: "disconnected"
        case .connecting, .awaitingAccept: recognisedOwnAddress ? "own-address" : "connecting"
        case .awaitingWelcome: "handshaking"
        case .streaming: transfer == nil ? "streaming" : "sending-snapshot"
        case .stopped: "own-address"
        }
    }
    /// What the receiver holds and what is in flight, while streaming.
    private(set) var cursor: ReplicationCursor?
    /// The snapshot being sent, while the receiver lacks what the journal no longer holds; no
    /// batch goes meanwhile.
    private(set) var transfer: SnapshotSending?
    /// When the transfer last progressed (ms).
    private var transferProgressMillis: UInt64 = 0
    private var transfers: UInt64 = 0
    /// How long a receiver may take to check and install a whole snapshot (loading millions of
    /// devices takes seconds) before the link gives up on it.
    let installTimeoutMillis: UInt64
    /// Bytes of snapshot per chunk: well under a receiver's smallest frame limit worth running.
    /// The most snapshot bytes one chunk carries: as configured, or less when the peer's frames
    /// are smaller (``peerFrameBytes``).
    private let configuredChunkBytes: Int
    var snapshotChunkBytes: Int { max(1, min(configuredChunkBytes, peerFrameBytes - Self.frameOverheadBytes)) }
    /// The largest frame the peer accepts (its HelloAccepted's limits), once it answered. A
    /// batch or chunk built larger would be refused (FRAME_TOO_LARGE) every time it was sent.
    private(set) var peerFrameBytes = Int.max
    /// What a peer frame carries besides its operations' or chunk's bytes, with room to spare.
    static let frameOverheadBytes = 256
    private var backoff: Backoff
    let ownNodeID: NodeID
    let ownInstanceID: UInt64
    /// Checks that the receiver's welcome signs ``ownChallenge`` with the cluster secret.
    let proof: PeerProof
    /// The connection's ``ChannelBinding``, set by the shell once the peer answered (empty
    /// without TLS): the welcome's proof must cover it, and this node's hello signs it.
    var binding: [UInt8] = []
    /// The challenge of the PeerHello in flight.
    private(set) var ownChallenge: UInt64 = 0
    let window: Int
    /// See ``ReplicationCursor/forwardDelayMillis``.
    let forwardDelayMillis: UInt64
    /// A handshake step or an acknowledgement not answered within this long ends the connection:
    /// a peer that stopped answering without closing (frozen, or cut off without a reset) is
    /// otherwise never noticed.
    let answerTimeoutMillis: UInt64
    /// ``answerTimeoutMillis`` unless told otherwise.
    static let defaultAnswerTimeoutMillis: UInt64 = 10_000
    /// When the handshake step being waited for began, or the oldest batch in flight was sent.
    private var waitingSince: UInt64?
    /// The address last answered as this node's own, and no other node has answered there since:
    /// its checks again keep the status "own-address", so that the link does not count as a peer
    /// for a moment each time (``ClusterPeers``, readiness, `registryctl`), and a check that
    /// fails keeps it so.
    private(set) var recognisedOwnAddress = false
    /// How long an address that answered as this node's own waits before it is checked again:
    /// one connection a minute costs nothing, and a party that replayed the answer stops the link
    /// for at most this long after it leaves.
    static let ownAddressRecheckMillis: UInt64 = 60_000
    /// The number of reconnections after a failure, for status.
    private(set) var failures: UInt64 = 0
    /// The last failure, for status.
    private(set) var lastFailure: String?

    init(
        ownNodeID: NodeID, ownInstanceID: UInt64, proof: PeerProof, window: Int, forwardDelayMillis: UInt64 = 500,
        answerTimeoutMillis: UInt64 = defaultAnswerTimeoutMillis,
        installTimeoutMillis: UInt64 = 600_000, snapshotChunkBytes: Int = 256 << 10, backoff: Backoff = Backoff()
    ) {
        self.configuredChunkBytes = snapshotChunkBytes
        self.answerTimeoutMillis = answerTimeoutMillis
        self.installTimeoutMillis = installTimeoutMillis
        self.ownNodeID = ownNodeID
        self.ownInstanceID = ownInstanceID
        self.proof = proof
        self.window = window
        self.forwardDelayMillis = forwardDelayMillis
        self.backoff = backoff
    }

    mutating func start() -> Action {
        guard state == .disconnected || state == .stopped else { return .none }
        state = .connecting
        return .connect
    }

    mutating func connected(nowMillis: UInt64 = 0) -> Action {
        guard state == .connecting else { return .none }
        state = .awaitingAccept
        waitingSince = nowMillis
        return .sendClientHello
    }

    /// Time passed: a handshake step or an acknowledgement that took too long ends the connection.
    mutating func tick(nowMillis: UInt64, random: inout some RandomNumberGenerator) -> Action {
        var since: UInt64?
        var timeout = answerTimeoutMillis
        switch state {
        case .awaitingAccept, .awaitingWelcome: since = waitingSince
        case .streaming: since = cursor?.oldestSentMillis
        case .disconnected, .connecting, .stopped: since = nil
        }
        if let transfer, transfer.sentBytes > transfer.acknowledgedBytes || transfer.awaitingInstall {
            since = min(since ?? .max, transferProgressMillis)
            if transfer.awaitingInstall { timeout = installTimeoutMillis }
        }
        guard let since, nowMillis >= since + timeout else { return .none }
        return fail("the peer did not answer within \(timeout) ms", random: &random)
    }

    /// The peer answered the client Hello. `challenge` is a fresh random number for the peer to
    /// sign in its welcome (drawn by the shell, so that the backoff's seeded jitter is not
    /// disturbed).
    mutating func received(_ frame: ServerFrame, challenge: UInt64, random: inout some RandomNumberGenerator) -> Action {
        guard state == .awaitingAccept else { return fail("a server frame arrived after the handshake", random: &random) }
        switch frame.body {
        case .helloAccepted(let accepted):
            if accepted.instanceID == ownInstanceID && accepted.nodeID == ownNodeID.value {
                defer { recognisedOwnAddress = true }
                return skipOwnAddress(first: !recognisedOwnAddress)
            }
            recognisedOwnAddress = false
            guard let peer = try? NodeID(accepted.nodeID) else {
                return fail("the peer names no valid node ID (\(accepted.nodeID.debugDescription))", random: &random)
            }
            state = .awaitingWelcome(peer: peer)
            peerFrameBytes = Int(accepted.limits.maxFrameBytes)
            ownChallenge = challenge
            return .sendPeerHello(challenge: accepted.challenge, ownChallenge: ownChallenge)
        case .error(let error):
            return fail("the peer refused the hello", refusal: error, random: &random)
        default:
            return fail("the peer answered the hello with something else", random: &random)
        }
    }

    mutating func received(_ frame: PeerFrame, nowMillis: UInt64, random: inout some RandomNumberGenerator) -> Action {
        switch (state, frame) {
        case (.awaitingWelcome(let peer), .welcome(let welcome)):
            guard welcome.nodeID == peer.value else {
                return fail("the peer's welcome names another node or an invalid log", random: &random)
            }
            // The proof first: reading the positions makes their node IDs, which a node keeps
            // (InternedText).
            guard proof.verify(welcome.proof, .welcome, challenge: ownChallenge, nodeID: welcome.nodeID, binding: binding) else {
                return fail("the peer did not prove the cluster secret over this connection's challenge", random: &random)
            }
            guard let holds = try? VersionVector(positions: welcome.versionVector) else {
                return fail("the peer's welcome names another node or an invalid log", random: &random)
            }
            state = .streaming(peer: peer)
            cursor = ReplicationCursor(
                receiverHolds: holds, window: window, ownOrigin: ownNodeID, forwardDelayMillis: forwardDelayMillis, nowMillis: nowMillis)
            backoff.reset()
            return .stream
        case (.streaming, .ack(let ack)):
            guard let held = try? VersionVector(positions: ack.held) else {
                return fail("an acknowledgement names an invalid log", random: &random)
            }
            do {
                try cursor?.acknowledged(ack.batchID, held: held, nowMillis: nowMillis)
            } catch {
                return fail("the peer acknowledged batch \(error.batchID), which was not sent", random: &random)
            }
            return .stream
        case (.streaming, .snapshotAck(let ack)):
            guard var sending = transfer else { return fail("a snapshot acknowledgement without a transfer", random: &random) }
            let installed: Bool
            do {
                installed = try sending.acknowledged(ack)
            } catch {
                return fail("the peer's snapshot acknowledgement is wrong: \(error.reason)", random: &random)
            }
            transferProgressMillis = nowMillis
            guard installed else {
                transfer = sending
                return .stream
            }
            guard let held = try? VersionVector(positions: ack.held) else {
                return fail("a snapshot acknowledgement names an invalid log", random: &random)
            }
            transfer = nil
            cursor?.installedSnapshot(holding: held, nowMillis: nowMillis)
            return .stream
        case (_, .refusal(let error)):
            return fail("the peer refused", refusal: error, random: &random)
        default:
            return fail("unexpected peer frame \(frame) in state \(state)", random: &random)
        }
    }

    /// The next run to send (see ``ReplicationCursor/nextRun(local:nowMillis:)``); none while a
    /// snapshot is being sent.
    mutating func nextRun(local: VersionVector, nowMillis: UInt64) -> ReplicationCursor.Run? {
        guard transfer == nil else { return nil }
        return cursor?.nextRun(local: local, nowMillis: nowMillis)
    }

    /// The receiver lacks operations the journal no longer holds: send it the newest snapshot, a
    /// file of `totalBytes`, before anything else. Returns the transfer's ID.
    mutating func startSnapshot(totalBytes: UInt64, nowMillis: UInt64) -> UInt64? {
        guard case .streaming = state, transfer == nil, totalBytes > 0 else { return nil }
        transfers += 1
        transfer = SnapshotSending(transferID: transfers, totalBytes: totalBytes, chunkBytes: snapshotChunkBytes)
        transferProgressMillis = nowMillis
        return transfers
    }

    /// The next bytes of the snapshot to send, recorded as sent; nil when none may go now.
    mutating func nextSnapshotChunk(nowMillis: UInt64) -> (transferID: UInt64, offset: UInt64, count: Int)? {
        guard var sending = transfer else { return nil }
        // A chunk sent with nothing outstanding starts the wait for an acknowledgement afresh.
        let idle = sending.sentBytes == sending.acknowledgedBytes
        guard let next = sending.nextChunk() else { return nil }
        if idle { transferProgressMillis = nowMillis }
        transfer = sending
        return (sending.transferID, next.offset, next.count)
    }

    /// Asks for the receiver's holdings as of now (``ReplicationCursor/wantProbe()``); nothing
    /// unless streaming.
    mutating func wantProbe() {
        cursor?.wantProbe()
    }

    /// Records a probe as sent when one is due (``ReplicationCursor/probeDue(nowMillis:)``);
    /// returns its batch ID.
    mutating func probeIfDue(nowMillis: UInt64) -> UInt64? {
        guard cursor?.probeDue(nowMillis: nowMillis) == true else { return nil }
        return cursor?.probing(nowMillis: nowMillis)
    }

    /// Records a batch as sent (see ``ReplicationCursor/sending(log:through:operations:oldestMillis:)``).
    mutating func sending(log: LogID, through: UInt64, operations: Int, oldestMillis: UInt64, nowMillis: UInt64 = 0) -> UInt64? {
        cursor?.sending(log: log, through: through, operations: operations, oldestMillis: oldestMillis, nowMillis: nowMillis)
    }

    /// The connection could not be opened, or closed, or failed.
    mutating func connectionLost(_ reason: String, random: inout some RandomNumberGenerator) -> Action {
        switch state {
        case .stopped, .disconnected: return .none
        default: return fail(reason, random: &random)
        }
    }

    /// The shell's own failure while streaming (a log it cannot read).
    mutating func failed(_ reason: String, random: inout some RandomNumberGenerator) -> Action {
        state == .stopped || state == .disconnected ? .none : fail(reason, random: &random)
    }

    /// The retry delay passed, or the delay before an own address is checked again.
    mutating func retryDue() -> Action {
        start()
    }

    /// The address is this node's own (as far as anything says): nothing until it is checked again.
    private mutating func skipOwnAddress(first: Bool) -> Action {
        state = .stopped
        waitingSince = nil
        return .ownAddress(recheckInMillis: Self.ownAddressRecheckMillis, first: first)
    }

    /// A failure as status shows it: why, and what the peer said, if anything.
    private static func failure(_ reason: String, _ refusal: WireError?) -> String {
        refusal.map { "\(reason): \($0)" } ?? reason
    }

    private mutating func fail(_ reason: String, refusal: WireError? = nil, random: inout some RandomNumberGenerator) -> Action {
        if state == .stopped { return .none }
        if recognisedOwnAddress {
            // A check of this node's own address that failed (a refusal, a timeout, no
            // connection: this node at its --max-connections, or busy) says nothing against it:
            // it stays this node's own until another node answers there.
            lastFailure = "checking that the address is this node's own: " + Self.failure(reason, refusal)
            return skipOwnAddress(first: false)
        }
        cursor = nil
        transfer = nil
        waitingSince = nil
        failures += 1
        lastFailure = Self.failure(reason, refusal)
        let proven: Bool
        if case .streaming = state { proven = true } else { proven = false }
        state = .disconnected
        return .closeAndRetry(retryInMillis: backoff.nextDelayMillis(using: &random), reason: reason, refusal: refusal, proven: proven)
    }
}
