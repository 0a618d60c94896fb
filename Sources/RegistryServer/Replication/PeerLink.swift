import Dispatch
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Platform
import RegistryCore
import RegistryStorage
import RegistryWire
import Synchronization

/// Streams this node's operations to one configured peer address: carries out what
/// ``PeerLinkStateMachine`` decides (connect, hello, stream, back off and reconnect), reading the
/// operations the peer lacks through the log API and sending them in batches.
///
/// `@unchecked Sendable`: its mutable state (`machine`, `channel`, `readers`, `buffered`,
/// `random`, `shutDown`) is touched solely on `queue`, a serial DispatchQueue: every entry point
/// (`start`, `commitHappened`, the connection's callbacks, `shutdown`) hops onto it first. It is
/// the link's single owner, as GRDB's SerializedDatabase is a database's.
final class PeerLink: @unchecked Sendable {
    /// The most operations in one batch (the receiver refuses more).
    static let maxBatchOperations = 1024
    /// Batches stop growing past this many bytes of operations, well under the frame limit.
    static let maxBatchBytes = 256 << 10

    /// The operation bytes one batch to this peer may carry: ``maxBatchBytes``, or less when
    /// the peer's frames are smaller (a batch always carries at least one operation).
    private var batchBytes: Int { min(Self.maxBatchBytes, machine.peerFrameBytes - PeerLinkStateMachine.frameOverheadBytes) }

    /// What an operation of `payload` bytes from `origin` takes in a batch frame, at most: its
    /// bytes, its origin, and the numbers and tags around them.
    static func encodedBytes(_ payload: Int, origin: String) -> Int { payload + origin.utf8.count + 48 }
    /// Batches in flight before the link waits for an acknowledgement.
    static let window = 4

    let address: PeerAddress
    /// TLS for the connection to the peer, and this node's certificate (DER); nil: plain TCP.
    private let tls: (context: NIOSSLContext, certificate: [UInt8])?
    private let engine: RegistryEngine
    private let group: any EventLoopGroup
    private let queue: DispatchQueue
    private var logger: Logger
    private var machine: PeerLinkStateMachine
    private var channel: (any Channel)?
    private var readers: [LogID: LogReader] = [:]
    /// Records read and not yet sent, per log (a journal entry may hold more than a batch).
    private var buffered: [LogID: ArraySlice<LogRecord>] = [:]
    private var random = SystemRandomNumberGenerator()
    private var shutDown = false
    /// Set while a pump is queued, so that commits in a burst queue one.
    private let pumpQueued = Atomic<Bool>(false)
    /// What `registryctl cluster status` shows, refreshed on `queue`.
    private let published: Mutex<PeerLinkStatus>
    /// Operations sent, for status.
    private var sentOperations: UInt64 = 0
    /// The node last reached at this address, kept while it is unreachable: the link stays that
    /// member's (``Replication`` links to members it has no link for).
    private var lastKnownNode = ""
    /// The node it last streamed to (``PeerLinkStatus/provenNodeID``).
    private var provenNode = ""
    /// Whether `--peers` names its address (``PeerLinkStatus/configured``).
    private let configured: Bool
    /// When it last streamed (``PeerLinkStatus/streamedAtMillis``).
    private var streamedAt: UInt64 = 0
    /// The protocol version of the peer's last welcome (``LinkedPeers`` holds a vendor move back
    /// from members before ``ProtocolVersion/vendorMoves``).
    private var peerVersion: ProtocolVersion?
    /// What the peer held when last heard from, kept while it is unreachable: the journal keeps
    /// what it lacks (the retention floor, see ``Replication``).
    private var knownHolds = VersionVector()
    /// The snapshot file being sent, open while ``PeerLinkStateMachine/transfer`` runs: an open
    /// file outlives its deletion by a newer snapshot.
    private var snapshotFile: OpenedSnapshot?

    /// The clock of the link's timeouts, backoffs and forwarding delays, in milliseconds:
    /// monotonic, so that a step of the wall clock neither keeps a dead peer's link open (a step
    /// back) nor closes a healthy one (a step forward). The replication lag alone is wall time
    /// (an operation's HLC against the node's clock, ``StatsReport``).
    private let monotonicMillis = SystemClock.monotonicMillis

    init(
        address: PeerAddress, configured: Bool, engine: RegistryEngine, group: any EventLoopGroup,
        tls: (context: NIOSSLContext, certificate: [UInt8])? = nil, logger: Logger,
        answerTimeoutMillis: UInt64 = PeerLinkStateMachine.defaultAnswerTimeoutMillis
    ) {
        self.tls = tls
        self.configured = configured
        self.address = address
        self.engine = engine
        self.group = group
        self.queue = DispatchQueue(label: "registry.peer-link.\(address)")
        var logger = logger
        logger[metadataKey: "peer_address"] = "\(address)"
        self.logger = logger
        self.machine = PeerLinkStateMachine(
            ownNodeID: engine.nodeID, ownInstanceID: engine.instanceID, proof: engine.peerIdentity.proof, window: Self.window,
            answerTimeoutMillis: answerTimeoutMillis)
        self.published = Mutex(PeerLinkStatus(address: address.description))
    }

    func start() {
        queue.async {
            self.carryOut(self.machine.start())
            self.tick()
        }
    }

    /// Every ``tickMillis`` the link sends what has become due without a commit or an
    /// acknowledgement to prompt it: forwarded logs, and probes (see ``ReplicationCursor``).
    static let tickMillis = 100

    private func tick() {
        queue.asyncAfter(deadline: .now() + .milliseconds(Self.tickMillis)) {
            guard !self.shutDown else { return }
            self.carryOut(self.machine.tick(nowMillis: self.monotonicMillis(), random: &self.random))
            self.pump()
            self.tick()
        }
    }

    /// Something became durable: send it, if streaming.
    func commitHappened() {
        guard !pumpQueued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async {
            self.pumpQueued.store(false, ordering: .releasing)
            self.pump()
        }
    }

    /// Asks the peer what it holds now: its answer raises the status's `answeredAtMillis` past
    /// this moment (``CatchUpBarrier``).
    func askHoldings() {
        queue.async {
            self.machine.wantProbe()
            self.pump()
        }
    }

    /// Closes the connection and stops reconnecting.
    func shutdown() {
        queue.sync {
            shutDown = true
            channel?.close(promise: nil)
            channel = nil
        }
    }

    var status: PeerLinkStatus {
        published.withLock { $0 }
    }

    // MARK: - Events from the connection (any thread)

    /// The answer to the client hello; `peerCertificate` is the one TLS verified (DER), nil
    /// without TLS.
    fileprivate func received(_ frame: ServerFrame, on source: any Channel, peerCertificate: [UInt8]?) {
        queue.async {
            guard self.channel === source else { return }
            self.machine.binding = ChannelBinding.of(dialer: self.tls?.certificate, receiver: peerCertificate)
            self.carryOut(self.machine.received(frame, challenge: UInt64.random(in: 1...UInt64.max), random: &self.random))
        }
    }

    fileprivate func received(_ frame: PeerFrame, on source: any Channel) {
        queue.async {
            guard self.channel === source else { return }
            self.carryOut(self.machine.received(frame, nowMillis: self.monotonicMillis(), random: &self.random))
            // Writes waiting for replicas learn that this peer holds them.
            let positions: [LogPosition]?
            switch frame {
            case .ack(let ack): positions = ack.held
            case .welcome(let welcome):
                positions = welcome.versionVector
                self.peerVersion = welcome.version
            case .snapshotAck(let ack) where ack.installed: positions = ack.held
            default: positions = nil
            }
            if let positions, case .streaming(let peer) = self.machine.state, let held = try? VersionVector(positions: positions) {
                self.engine.replicas.peer(peer, holdsThrough: held[self.engine.peerIdentity.ownLog], restated: { if case .welcome = frame { true } else { false } }())
            }
        }
    }

    fileprivate func closed(_ source: any Channel, reason: String) {
        queue.async {
            guard self.channel === source else { return }
            self.channel = nil
            self.carryOut(self.machine.connectionLost(reason, random: &self.random))
        }
    }

    // MARK: - Carrying out the state machine's actions (on `queue`)

    private func carryOut(_ action: PeerLinkStateMachine.Action) {
        dispatchPrecondition(condition: .onQueue(queue))
        logger.trace("peer link", metadata: ["action": "\(action)", "state": "\(machine.state)"])
        switch action {
        case .connect:
            connect()
        case .sendClientHello:
            let hello = Hello(version: .current, role: .peer, clientName: "registryd \(engine.nodeID)")
            send { buffer throws(CodecError) in try ClientFrame(requestID: 0, body: .hello(hello)).encodeFrame(into: &buffer) }
        case .sendPeerHello(let challenge, let ownChallenge):
            let (vector, records, claims) = engine.holdings
            let hello = engine.peerIdentity.hello(
                holding: vector, deviceRecords: records, claims: claims, challenge: challenge, ownChallenge: ownChallenge,
                binding: machine.binding)
            send { buffer throws(CodecError) in try PeerFrame.hello(hello).encodeFrame(into: &buffer) }
        case .stream:
            if case .streaming(let peer) = machine.state, logger[metadataKey: "peer_node"] == nil {
                logger[metadataKey: "peer_node"] = "\(peer)"
                logger.info("replicating to peer")
            }
            pump()
        case .closeAndRetry(let delay, let reason, let refusal, let proven):
            if let refusal {
                logger.warning(
                    "peer refused this node", metadata: ["reason": "\(reason)", "error": "\(refusal)", "peer_proven": "\(proven)"])
                engine.counters.record(error: refusal.code)
                // Only a peer that proved the cluster secret is believed: a removal is durable.
                if proven && refusal.code == .nodeRemoved { engine.membership.learnedRemoval() }
                if proven && refusal.code == .snapshotRefused && !refusal.retryable {
                    // The peer cannot combine what it holds with the snapshot sent (or it was
                    // damaged): a newer one covers everything this node holds, which includes
                    // whatever the peer trimmed (it trims only what its peers hold).
                    logger.info("taking a newer snapshot for a peer that refused the last one")
                    engine.pipeline.snapshotNow { _ in }
                }
            } else {
                logger.info("peer link down; reconnecting", metadata: ["reason": "\(reason)", "retry_ms": "\(delay)"])
            }
            logger[metadataKey: "peer_node"] = nil
            channel?.close(promise: nil)
            channel = nil
            readers = [:]
            buffered = [:]
            closeSnapshotFile()
            retry(afterMillis: delay)
        case .ownAddress(let delay, let first):
            if first {
                logger.info("peer address is this node's own; skipping it", metadata: ["recheck_ms": "\(delay)"])
            }
            channel?.close(promise: nil)
            channel = nil
            retry(afterMillis: delay)
        case .none:
            break
        }
        publishStatus()
    }

    /// Tells the state machine its delay passed, unless the link was shut down meanwhile.
    private func retry(afterMillis delay: UInt64) {
        guard !shutDown else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(Int(delay))) {
            guard !self.shutDown else { return }
            self.carryOut(self.machine.retryDue())
        }
    }

    private func connect() {
        let link = self
        ClientBootstrap(group: group)
            .keepalive()
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(3))
            .channelInitializer { [tls] channel in
                channel.eventLoop.makeCompletedFuture {
                    // Peers verify each other's certificates against the cluster's CA, not a host name.
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls.context, serverHostname: nil))
                    }
                    try channel.pipeline.syncOperations.addHandler(PeerLinkHandler(link: link))
                }
            }
            .connect(host: address.host, port: address.port)
            .whenComplete { result in
                link.queue.async {
                    switch result {
                    case .success(let channel):
                        guard !link.shutDown else {
                            channel.close(promise: nil)
                            return
                        }
                        link.channel = channel
                        link.carryOut(link.machine.connected(nowMillis: link.monotonicMillis()))
                    case .failure(let error):
                        link.carryOut(link.machine.connectionLost("cannot connect: \(error)", random: &link.random))
                    }
                }
            }
    }

    private func send(_ encode: (inout ByteBuffer) throws(CodecError) -> Void) {
        guard let channel else { return }
        var buffer = channel.allocator.buffer(capacity: 256)
        do {
            try encode(&buffer)
        } catch {
            logger.error("cannot encode a peer frame", metadata: ["error": "\(error)"])
            return
        }
        channel.writeAndFlush(buffer, promise: nil)
    }

    /// Sends batches while the cursor has a run for them and the window allows.
    private func pump() {
        dispatchPrecondition(condition: .onQueue(queue))
        guard case .streaming = machine.state, let channel else { return }
        let local = engine.durableVector
        var wrote = false
        defer {
            if wrote { channel.flush() }
            publishStatus(local: local)
        }
        let now = monotonicMillis()
        if machine.transfer != nil {
            wrote = sendSnapshotChunks(on: channel, nowMillis: now)
            return
        }
        closeSnapshotFile()  // a transfer that ended
        if let probe = machine.probeIfDue(nowMillis: now) {
            send { buffer throws(CodecError) in try PeerFrame.batch(OperationBatch(batchID: probe, operations: [])).encodeFrame(into: &buffer) }
        }
        while let run = machine.nextRun(local: local, nowMillis: now) {
            let operations: [PeerOperation]
            do {
                operations = try take(run.log, from: run.from, through: run.through)
            } catch .trimmed(_, _, let through) {
                wrote = startSnapshot(on: channel, reason: "it lacks \(run.log) from \(run.from), trimmed through \(through)", nowMillis: now) || wrote
                return
            } catch {
                let reason = "cannot read \(run.log) from \(run.from): \(error)"
                logger.error("peer link cannot read the log", metadata: ["error": "\(error)"])
                return carryOut(machine.failed(reason, random: &random))
            }
            guard let last = operations.last else { return }
            guard
                let batchID = machine.sending(
                    log: run.log, through: last.sequence, operations: operations.count, oldestMillis: operations[0].hlc >> 16, nowMillis: now)
            else { return }
            var buffer = channel.allocator.buffer(capacity: 64 + operations.reduce(0) { $0 + $1.operation.count + 48 })
            do {
                try OperationBatchWriter.writeFrame(batchID: batchID, operations: operations, into: &buffer)
            } catch {
                logger.error("cannot encode a batch", metadata: ["error": "\(error)"])
                return carryOut(machine.failed("cannot encode a batch: \(error)", random: &random))
            }
            channel.write(buffer, promise: nil)
            sentOperations += UInt64(operations.count)
            wrote = true
        }
    }

    /// The receiver lacks operations that the journal no longer holds: starts sending the newest
    /// snapshot (which covers them), then the log tail past it. Returns whether it wrote.
    private func startSnapshot(on channel: any Channel, reason: String, nowMillis: UInt64) -> Bool {
        let opened: OpenedSnapshot
        do {
            guard let newest = try engine.snapshots.openNewest() else {
                logger.error("the peer lacks trimmed operations, and there is no snapshot to send", metadata: ["reason": "\(reason)"])
                carryOut(machine.failed("no snapshot covers what the journal trimmed", random: &random))
                return false
            }
            opened = newest
        } catch {
            logger.error("cannot open a snapshot to send", metadata: ["error": "\(error)"])
            carryOut(machine.failed("cannot open a snapshot: \(error)", random: &random))
            return false
        }
        guard machine.startSnapshot(totalBytes: UInt64(opened.bytes), nowMillis: nowMillis) != nil else {
            opened.close()
            return false
        }
        snapshotFile = opened
        logger.info(
            "sending a snapshot to the peer: it lacks what the journal trimmed",
            metadata: ["snapshot": "\(opened.name)", "bytes": "\(opened.bytes)", "reason": "\(reason)"])
        return sendSnapshotChunks(on: channel, nowMillis: nowMillis)
    }

    /// Sends the snapshot's next chunks while the window allows; returns whether it wrote.
    private func sendSnapshotChunks(on channel: any Channel, nowMillis: UInt64) -> Bool {
        guard let file = snapshotFile else { return false }
        var wrote = false
        while let next = machine.nextSnapshotChunk(nowMillis: nowMillis) {
            let data: [UInt8]
            do {
                data = try file.read(at: Int(next.offset), count: next.count)
            } catch {
                logger.error("cannot read the snapshot being sent", metadata: ["error": "\(error)"])
                carryOut(machine.failed("cannot read \(file.name): \(error)", random: &random))
                return wrote
            }
            let chunk = SnapshotChunk(
                transferID: next.transferID, offset: next.offset, totalBytes: machine.transfer?.totalBytes ?? 0, data: data)
            var buffer = channel.allocator.buffer(capacity: next.count + 64)
            do {
                try PeerFrame.snapshotChunk(chunk).encodeFrame(into: &buffer)
            } catch {
                carryOut(machine.failed("cannot encode a snapshot chunk: \(error)", random: &random))
                return wrote
            }
            channel.write(buffer, promise: nil)
            wrote = true
        }
        return wrote
    }

    private func closeSnapshotFile() {
        if let file = snapshotFile {
            file.close()
            snapshotFile = nil
        }
    }

    /// The next operations of `log` from `from`, at most a batch's worth, in order: from memory
    /// when the engine still keeps them (``RecentOperations``), otherwise from the journal. Both
    /// hold them as the journal wrote them, so nothing is encoded again.
    private func take(_ log: LogID, from: UInt64, through: UInt64) throws(JournalReadError) -> [PeerOperation] {
        if let recent = engine.recent.read(log, from: from, atMost: Self.maxBatchOperations) {
            buffered[log] = nil
            var taken = recent[...]
            return batch(from: &taken, through: through)
        }
        return try takeFromJournal(log, from: from, through: through)
    }

    /// The next operations of `log` from `from` through `through` at most in the journal: at most
    /// a batch's worth, in order.
    private func takeFromJournal(_ log: LogID, from: UInt64, through: UInt64) throws(JournalReadError) -> [PeerOperation] {
        if let first = buffered[log]?.first, first.sequence != from { buffered[log] = nil }
        if buffered[log]?.isEmpty ?? true {
            var reader = readers[log]
            if reader?.nextSequence != from {
                reader = try engine.logReader(for: log, from: from)
                readers[log] = reader
            }
            buffered[log] = try reader!.nextRecords(atMost: Self.maxBatchOperations)[...]
        }
        guard var pending = buffered[log], !pending.isEmpty else { return [] }
        let operations = batch(from: &pending, through: through)
        buffered[log] = pending
        return operations
    }

    /// Takes from the front of `pending` what one batch carries, as the batch's operations: at
    /// most ``maxBatchOperations`` records and ``batchBytes`` (at least one record), through
    /// sequence `through` at most. Each record is read where it lies: a copy of it would retain
    /// and release its origin and its bytes once more.
    private func batch(from pending: inout ArraySlice<LogRecord>, through: UInt64) -> [PeerOperation] {
        var operations = [PeerOperation]()
        var bytes = 0
        var next = pending.startIndex
        while next < pending.endIndex, operations.count < Self.maxBatchOperations, pending[next].sequence <= through {
            bytes += Self.encodedBytes(pending[next].payload.count, origin: pending[next].origin)
            guard operations.isEmpty || bytes <= batchBytes else { break }
            operations.append(PeerOperation(pending[next]))
            next += 1
        }
        pending = pending[next...]
        return operations
    }

    private func publishStatus(local: VersionVector? = nil) {
        let local = local ?? engine.durableVector
        var status = PeerLinkStatus(address: address.description)
        status.configured = configured
        status.state = machine.statusName
        switch machine.state {
        case .awaitingWelcome(let peer): lastKnownNode = peer.value
        case .streaming(let peer): (lastKnownNode, provenNode, streamedAt) = (peer.value, peer.value, monotonicMillis())
        case .disconnected, .connecting, .awaitingAccept, .stopped: break
        }
        status.provenNodeID = provenNode
        status.streamedAtMillis = streamedAt
        status.nodeID = lastKnownNode
        status.peerVersion = peerVersion
        if let cursor = machine.cursor {
            status.backlogOperations = cursor.backlog(local: local)
            status.inFlightBatches = UInt64(cursor.inFlight.count)
            status.oldestUnacknowledgedMillis = cursor.oldestUnacknowledgedMillis ?? 0
            knownHolds = cursor.receiverHolds
            status.answeredAtMillis = cursor.answeredSentMillis ?? 0
        } else {
            status.backlogOperations = knownHolds.backlog(behind: local)
        }
        status.peerHolds = knownHolds.positions
        status.reconnects = machine.failures
        status.lastError = machine.lastFailure ?? ""
        status.sentOperations = sentOperations
        published.withLock { $0 = status }
    }
}

/// The dialing side's channel handler: cuts frames, decodes the first as the ServerFrame that
/// answers the client Hello and the rest as PeerFrames, and passes them to the ``PeerLink``.
private final class PeerLinkHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let link: PeerLink
    private var frames = FrameReader(maxFrameBytes: 16 << 20)
    private var accepted = false

    init(link: PeerLink) {
        self.link = link
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        frames.append(&bytes)
        do {
            while let payload = try frames.next() {
                if accepted {
                    link.received(try PeerFrame(decoding: payload), on: context.channel)
                } else {
                    accepted = true
                    let certificate = try? context.pipeline.syncOperations.nioSSL_peerCertificate()?.toDERBytes()
                    link.received(try ServerFrame(decoding: payload), on: context.channel, peerCertificate: certificate)
                }
            }
        } catch {
            link.closed(context.channel, reason: "the peer sent a bad frame: \(error)")
            context.close(promise: nil)
        }
        frames.compact()
    }

    func channelInactive(context: ChannelHandlerContext) {
        link.closed(context.channel, reason: "the connection closed")
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        link.closed(context.channel, reason: "connection error: \(error)")
        context.close(promise: nil)
    }
}
