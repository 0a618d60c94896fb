import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// The sending side's connection life, and its backoff, deterministic under a seed.
@Suite struct PeerLinkStateMachineTests {
    let own = NodeID(trusted: "node-a")

    func accepted(node: String, instance: UInt64) -> ServerFrame {
        ServerFrame(
            requestID: 0,
            body: .helloAccepted(
                HelloAccepted(version: .current, nodeID: node, clusterID: "c", serverVersion: "t", limits: .default, instanceID: instance)))
    }

    @Test func connectsSaysHelloStreamsAndReconnectsAfterAFailure() {
        var random = SplitMix64(seed: 1)
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2)
        #expect(machine.start() == .connect)
        #expect(machine.connected() == .sendClientHello)
        guard case .sendPeerHello = machine.received(accepted(node: "node-b", instance: 9), random: &random) else {
            return #expect(Bool(false), "expected the peer hello")
        }
        let welcome = PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [LogPosition(origin: "node-a", epoch: 1, sequence: 5)], maxBatchOperations: 10)
        #expect(machine.received(machine.signed(welcome), nowMillis: 1_000, random: &random) == .stream)
        #expect(machine.cursor?.receiverHolds[LogID(origin: own, epoch: 1)] == 5)
        let action = machine.connectionLost("reset", random: &random)
        guard case .closeAndRetry(let delay, _, nil, true) = action else {
            Issue.record("expected a retry, got \(action)")
            return
        }
        #expect((50...100).contains(delay))
        #expect(machine.cursor == nil && machine.failures == 1)
        #expect(machine.retryDue() == .connect)
    }

    /// A link whose address answered with this node's own instance ID.
    func linkThatReachedItsOwnAddress(random: inout SplitMix64) -> PeerLinkStateMachine {
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2)
        _ = machine.start()
        _ = machine.connected()
        let answer = machine.received(accepted(node: "node-a", instance: 7), random: &random)
        #expect(answer == .ownAddress(recheckInMillis: PeerLinkStateMachine.ownAddressRecheckMillis, first: true))
        return machine
    }

    @Test func itsOwnAddressIsSkippedAndCheckedAgainLater() {
        var random = SplitMix64(seed: 1)
        var machine = linkThatReachedItsOwnAddress(random: &random)
        let recheck = PeerLinkStateMachine.ownAddressRecheckMillis
        #expect(machine.statusName == "own-address")
        #expect(machine.connectionLost("closed", random: &random) == PeerLinkStateMachine.Action.none)
        #expect(machine.tick(nowMillis: 1_000_000, random: &random) == PeerLinkStateMachine.Action.none)
        // Checked again: the status stays what it was while the check runs.
        #expect(machine.retryDue() == .connect)
        #expect(machine.statusName == "own-address")
        #expect(machine.connected() == .sendClientHello)
        #expect(machine.statusName == "own-address")
        #expect(machine.received(accepted(node: "node-a", instance: 7), random: &random) == .ownAddress(recheckInMillis: recheck, first: false))
        #expect(machine.failures == 0)
    }

    /// Anything that answers at a peer's address can replay this node's instance ID, which any
    /// client learns from its own HelloAccepted: the link it stopped comes back at the next check.
    @Test func aReplayedOwnInstanceStopsTheLinkOnlyUntilTheNextCheck() {
        var random = SplitMix64(seed: 3)
        var machine = linkThatReachedItsOwnAddress(random: &random)
        #expect(machine.retryDue() == .connect)
        #expect(machine.connected() == .sendClientHello)
        guard case .sendPeerHello = machine.received(accepted(node: "node-b", instance: 9), random: &random) else {
            Issue.record("expected the real peer's handshake, got state \(machine.state)")
            return
        }
        #expect(machine.state == .awaitingWelcome(peer: NodeID(trusted: "node-b")))
        #expect(machine.statusName == "handshaking")
    }

    /// A check that fails (this node at its --max-connections refuses its own link, or is too
    /// busy to answer in time) leaves the address this node's own: else it would count as a peer
    /// that nothing answers at, which holds the journal and vendor changes back.
    @Test func aFailedCheckOfItsOwnAddressKeepsItOwn() {
        var random = SplitMix64(seed: 4)
        var machine = linkThatReachedItsOwnAddress(random: &random)
        let recheck = PeerLinkStateMachine.Action.ownAddress(recheckInMillis: PeerLinkStateMachine.ownAddressRecheckMillis, first: false)
        #expect(machine.retryDue() == .connect)
        #expect(machine.connectionLost("cannot connect", random: &random) == recheck)
        #expect(machine.statusName == "own-address")
        #expect(machine.retryDue() == .connect)
        _ = machine.connected()
        let full = ServerFrame(requestID: 0, body: .error(WireError(code: .tooManyConnections, message: "full", retryable: true)))
        #expect(machine.received(full, challenge: 1, random: &random) == recheck)
        #expect(machine.statusName == "own-address" && machine.failures == 0)
        #expect(machine.lastFailure?.contains("this node's own") == true, "\(String(describing: machine.lastFailure))")
    }

    @Test func refusalsAndProtocolViolationsCloseAndRetry() {
        var random = SplitMix64(seed: 2)
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2)
        _ = machine.start()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        let refusal = WireError(code: .wrongCluster, message: "no")
        guard case .closeAndRetry(_, _, let seen, let proven) = machine.received(.refusal(refusal), nowMillis: 1_000, random: &random) else {
            Issue.record("expected a retry")
            return
        }
        #expect(seen == refusal && !proven && machine.lastFailure?.contains("wrong_cluster") == true)
        _ = machine.start()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        _ = machine.received(machine.signed(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)), nowMillis: 1_000, random: &random)
        guard case .closeAndRetry = machine.received(.ack(BatchAck(batchID: 5, held: [])), nowMillis: 1_000, random: &random) else {
            Issue.record("an acknowledgement of a batch never sent must end the connection")
            return
        }
    }

    /// A refusal is believed (`proven`, which the shell needs before it records its own removal)
    /// only from a peer whose welcome proved the cluster secret: whatever answers at a peer's
    /// address can send one before that, at the client hello or at the peer hello, and a removal
    /// is durable and replicated.
    @Test func onlyARefusalFromAPeerThatProvedItselfIsBelieved() {
        var random = SplitMix64(seed: 4)
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2)
        let removed = WireError(code: .nodeRemoved, message: "node-a was removed")
        func proven(_ action: PeerLinkStateMachine.Action) -> Bool? {
            guard case .closeAndRetry(_, _, let refusal, let proven) = action, refusal == removed else { return nil }
            return proven
        }
        _ = machine.start()
        _ = machine.connected()
        #expect(proven(machine.received(ServerFrame(requestID: 0, body: .error(removed)), challenge: 3, random: &random)) == false)
        _ = machine.retryDue()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        #expect(proven(machine.received(.refusal(removed), nowMillis: 1_000, random: &random)) == false)
        _ = machine.retryDue()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        // A welcome that does not prove the secret, then the refusal: still unproven.
        let welcome = PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)
        guard case .closeAndRetry = machine.received(.welcome(welcome), nowMillis: 1_000, random: &random) else {
            Issue.record("an unsigned welcome must end the connection")
            return
        }
        _ = machine.retryDue()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        #expect(machine.received(machine.signed(welcome), nowMillis: 1_000, random: &random) == .stream)
        #expect(proven(machine.received(.refusal(removed), nowMillis: 1_000, random: &random)) == true)
    }

    /// A welcome or an acknowledgement that names a sequence past any a log can reach is a
    /// protocol violation: taken as held, `UInt64.max` made the cursor's next run overflow and
    /// trap, on every reconnection.
    @Test func aSequencePastTheLargestEndsTheConnection() {
        var random = SplitMix64(seed: 3)
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2)
        for sequence in [UInt64.max, VersionVector.largestSequence + 1] {
            _ = machine.start()
            _ = machine.connected()
            _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
            let welcome = PeerWelcome(
                nodeID: "node-b", epoch: 1, versionVector: [LogPosition(origin: "node-a", epoch: 1, sequence: sequence)], maxBatchOperations: 10)
            guard case .closeAndRetry = machine.received(machine.signed(welcome), nowMillis: 1_000, random: &random) else {
                Issue.record("a welcome holding sequence \(sequence) must end the connection")
                return
            }
            #expect(machine.cursor == nil)
        }
        _ = machine.start()
        _ = machine.connected()
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        let largest = PeerWelcome(
            nodeID: "node-b", epoch: 1, versionVector: [LogPosition(origin: "node-a", epoch: 1, sequence: VersionVector.largestSequence)],
            maxBatchOperations: 10)
        #expect(machine.received(machine.signed(largest), nowMillis: 1_000, random: &random) == .stream)
        // The receiver holds more of this node's log than it wrote: nothing to send, and no trap.
        var local = VersionVector()
        local.recordAll(through: 10, in: LogID(origin: own, epoch: 1))
        #expect(machine.nextRun(local: local, nowMillis: 1_000) == nil)
    }

    /// Positions from the wire: a sequence up to the largest is read, past it refused with a
    /// typed error that says why, from a peer and from a client alike.
    @Test func positionsPastTheLargestSequenceAreRefused() throws {
        let largest = LogPosition(origin: "node-a", epoch: 1, sequence: VersionVector.largestSequence)
        #expect(try VersionVector(positions: [largest])[LogID(origin: own, epoch: 1)] == VersionVector.largestSequence)
        for sequence in [VersionVector.largestSequence + 1, UInt64.max] {
            let past = LogPosition(origin: "node-a", epoch: 1, sequence: sequence)
            #expect(throws: WireError.self) { try VersionVector(positions: [past]) }
            #expect(throws: WireError.self) { try VersionVector.fromClient([past]) }
            #expect(throws: WireError.self) { try VersionVector.fromClient([LogPosition(origin: "node-unheard-of", epoch: 1, sequence: sequence)]) }
            do {
                _ = try VersionVector(positions: [past])
            } catch {
                #expect(error.code == .invalidArgument && error.message.contains("past the largest"))
            }
        }
    }

    @Test func backoffGrowsToItsCapWithJitterAndResets() {
        var random = SplitMix64(seed: 3)
        var backoff = Backoff(initialMillis: 100, maxMillis: 1_000)
        let delays = (0..<8).map { _ in backoff.nextDelayMillis(using: &random) }
        for (attempt, delay) in delays.enumerated() {
            let step: UInt64 = min(1_000, 100 << UInt64(attempt))
            #expect((step / 2...step).contains(delay), "attempt \(attempt): \(delay)")
        }
        #expect(Set(delays.suffix(4)).count > 1, "jitter spreads capped delays")
        backoff.reset()
        #expect((50...100).contains(backoff.nextDelayMillis(using: &random)))
    }

    @Test func aPeerThatStopsAnsweringEndsTheConnection() {
        var random = SplitMix64(seed: 4)
        var machine = PeerLinkStateMachine(ownNodeID: own, ownInstanceID: 7, window: 2, answerTimeoutMillis: 1_000)
        _ = machine.start()
        _ = machine.connected(nowMillis: 100)
        #expect(machine.tick(nowMillis: 1_000, random: &random) == .none)
        guard case .closeAndRetry = machine.tick(nowMillis: 1_100, random: &random) else {
            Issue.record("a handshake without an answer must time out")
            return
        }
        _ = machine.start()
        _ = machine.connected(nowMillis: 2_000)
        _ = machine.received(accepted(node: "node-b", instance: 9), random: &random)
        _ = machine.received(machine.signed(PeerWelcome(nodeID: "node-b", epoch: 1, versionVector: [], maxBatchOperations: 10)), nowMillis: 2_000, random: &random)
        #expect(machine.tick(nowMillis: 9_000, random: &random) == .none, "nothing in flight, nothing to wait for")
        _ = machine.sending(log: LogID(origin: own, epoch: 1), through: 1, operations: 1, oldestMillis: 1, nowMillis: 9_000)
        #expect(machine.tick(nowMillis: 9_900, random: &random) == .none)
        guard case .closeAndRetry = machine.tick(nowMillis: 10_000, random: &random) else {
            Issue.record("a batch without an acknowledgement must time out")
            return
        }
    }
}
