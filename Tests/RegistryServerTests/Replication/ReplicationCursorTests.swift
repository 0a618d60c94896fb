import RegistryCore
import Testing
@testable import RegistryServer

/// What a sender sends next, and how acknowledgements and the window bound it.
@Suite struct ReplicationCursorTests {
    let a = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let c = LogID(origin: NodeID(trusted: "node-c"), epoch: 2)


    func cursor(holding holds: VersionVector, window: Int = 8) -> ReplicationCursor {
        ReplicationCursor(receiverHolds: holds, window: window, ownOrigin: a.origin, forwardDelayMillis: 500, nowMillis: 1_000)
    }

    @Test func sendsItsOwnLogAtOnceAndForwardsOthersOnlyOnceTheReceiverLacksThemForAWhile() throws {
        var cursor = cursor(holding: VersionVector.holding([(a, 3)]))
        let local = VersionVector.holding([(a, 10), (c, 4)])
        #expect(cursor.backlog(local: local) == 11)
        let firstRun = cursor.nextRun(local: local, nowMillis: 1_000)
        let first = try #require(firstRun)
        #expect(first.log == a && first.from == 4)
        _ = cursor.sending(log: a, through: 10, operations: 7, oldestMillis: 5)
        // Node c's log: its origin normally delivers it, so not yet.
        #expect(cursor.nextRun(local: local, nowMillis: 1_200) == nil)
        #expect(!cursor.probeDue(nowMillis: 1_300), "a batch is in flight; its acknowledgement will tell")
        // The receiver got c's first operation from elsewhere: the wait starts again when this
        // node learns of it.
        try cursor.acknowledged(1, held: VersionVector.holding([(a, 10), (c, 1)]), nowMillis: 1_300)
        #expect(cursor.nextRun(local: local, nowMillis: 1_400) == nil)
        #expect(!cursor.probeDue(nowMillis: 1_400) && cursor.probeDue(nowMillis: 1_550))
        #expect(cursor.nextRun(local: local, nowMillis: 1_500) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_550), held: VersionVector.holding([(a, 10), (c, 1)]), nowMillis: 1_550)
        #expect(cursor.nextRun(local: local, nowMillis: 1_900) == nil, "no report since 1,300 ms is half a second old")
        // A report half a second after the growth says the receiver still lacks c's operations
        // 2...4: forwarded.
        try cursor.acknowledged(cursor.probing(nowMillis: 1_850), held: VersionVector.holding([(a, 10), (c, 1)]), nowMillis: 1_850)
        let secondRun = cursor.nextRun(local: local, nowMillis: 1_900)
        let second = try #require(secondRun)
        #expect(second.log == c && second.from == 2)
        _ = cursor.sending(log: c, through: 4, operations: 3, oldestMillis: 9)
        #expect(cursor.nextRun(local: local, nowMillis: 2_000) == nil, "everything is sent")
        #expect(cursor.oldestUnacknowledgedMillis == 9)
    }

    @Test func aReceiverThatGotTheOperationsFromTheirOriginIsNotSentThemAgain() throws {
        var cursor = cursor(holding: VersionVector())
        let local = VersionVector.holding([(c, 4)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        #expect(cursor.probeDue(nowMillis: 1_250))
        let probe = cursor.probing(nowMillis: 1_250)
        try cursor.acknowledged(probe, held: VersionVector.holding([(c, 4)]), nowMillis: 1_260)
        #expect(cursor.nextRun(local: local, nowMillis: 5_000) == nil && !cursor.probeDue(nowMillis: 5_000))
        #expect(cursor.backlog(local: local) == 0)
    }

    /// Drives `cursor` in steps of 100 ms from 1,000 ms: at each, this node holds `step` of its
    /// own log and `local(step)` of c's, and sends whatever is due; a batch of its own log is
    /// acknowledged at once, the receiver then holding `held(step)` of c's. Returns when c's
    /// log was first forwarded, or nil when it never was.
    func firstForwarding(
        _ cursor: inout ReplicationCursor, steps: Int, local: (Int) -> UInt64, held: (Int) -> UInt64
    ) throws -> UInt64? {
        var now: UInt64 = 1_000
        for step in 1...steps {
            now += 100
            let holding = VersionVector.holding([(a, UInt64(step)), (c, local(step))])
            while let run = cursor.nextRun(local: holding, nowMillis: now) {
                if run.log == c { return now }
                let batch = cursor.sending(log: a, through: UInt64(step), operations: 1, oldestMillis: now, nowMillis: now)
                try cursor.acknowledged(batch, held: VersionVector.holding([(a, UInt64(step)), (c, held(step))]), nowMillis: now)
            }
        }
        return nil
    }

    /// Under steady load a receiver always lacks the newest operations of another origin, which
    /// that origin is still delivering. Lacking some is not lacking the same ones: as long as it
    /// keeps getting the log from elsewhere, nothing is forwarded. Every 100 ms this node holds
    /// 1,000 more of c's operations and the receiver, fed by c, is 300 behind, for 10 s, twice
    /// the slow-delivery wait.
    @Test func aReceiverKeptBusyByTheOriginIsNotForwardedItsLog() throws {
        var cursor = cursor(holding: VersionVector())
        #expect(try firstForwarding(&cursor, steps: 100, local: { UInt64($0 * 1_000) }, held: { UInt64($0 * 1_000 - 300) }) == nil)
    }

    /// A receiver that gets another origin's log from elsewhere, but slower than the log grows
    /// (100 operations every 100 ms against 1,000), falls further behind: forwarded once it has
    /// not got, in ten forwarding delays, what this node held when it began to wait, though its
    /// holding never stops growing.
    @Test func aReceiverFedSlowerThanTheLogGrowsIsForwardedIt() throws {
        var cursor = cursor(holding: VersionVector())
        #expect(cursor.slowDeliveryMillis == 5_000)
        // It got what this node held at 1,100 ms (1,000) by 2,000 ms; what this node held then
        // (10,000) it has not got 5 s on.
        #expect(try firstForwarding(&cursor, steps: 80, local: { UInt64($0 * 1_000) }, held: { UInt64($0 * 100) }) == 7_000)
    }

    /// A receiver far behind on another origin's log, which the origin is catching up faster
    /// than the log grows, is not forwarded it, though it lacks for 25 s what this node held:
    /// this node holds 50,000 of c's operations and gets 100 more every 100 ms, and the receiver
    /// gets 300 every 100 ms from c.
    @Test func aReceiverCatchingUpFromTheOriginIsNotForwardedItsLog() throws {
        var cursor = cursor(holding: VersionVector())
        let forwarded = try firstForwarding(
            &cursor, steps: 300, local: { UInt64(50_000 + $0 * 100) }, held: { UInt64(min($0 * 300, 50_000 + $0 * 100)) })
        #expect(forwarded == nil)
        #expect(cursor.backlog(local: VersionVector.holding([(a, 300), (c, 80_000)])) == 0)
    }

    /// A node with no operations of its own in flight learns what the receiver holds from probes
    /// alone: it forwards nothing while the receiver keeps pace, and forwards once it stops.
    @Test func probesAloneTellWhetherTheReceiverKeepsPace() throws {
        var cursor = cursor(holding: VersionVector())
        var now: UInt64 = 1_000
        for step in 1...20 {
            now += 100
            let local = VersionVector.holding([(c, UInt64(step * 1_000))])
            #expect(cursor.nextRun(local: local, nowMillis: now) == nil, "step \(step)")
            if cursor.probeDue(nowMillis: now) {
                let probe = cursor.probing(nowMillis: now)
                try cursor.acknowledged(probe, held: VersionVector.holding([(c, UInt64(step * 1_000 - 500))]), nowMillis: now)
            }
        }
        // The receiver stops getting c's log; this node does not.
        let stalled = VersionVector.holding([(c, 19_500)])
        let local = VersionVector.holding([(c, 25_000)])
        var forwarded: UInt64?
        while forwarded == nil, now < 5_000 {
            now += 50
            if cursor.nextRun(local: local, nowMillis: now) != nil {
                forwarded = now
            } else if cursor.probeDue(nowMillis: now) {
                try cursor.acknowledged(cursor.probing(nowMillis: now), held: stalled, nowMillis: now)
            }
        }
        let at = try #require(forwarded)
        #expect(at > 3_000 && at <= 3_700, "forwarded at \(at) ms")
    }

    /// While this node forwards, its batches in flight run ahead of what the receiver
    /// acknowledged; what the receiver holds beyond the batches it acknowledged came from
    /// elsewhere, and stops the forwarding although it is less than this node sent.
    @Test func forwardingStopsOnceTheReceiverGetsTheLogFromElsewhereWithBatchesInFlight() throws {
        var cursor = cursor(holding: VersionVector.holding([(c, 1_000)]), window: 4)
        let local = VersionVector.holding([(c, 20_000)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_500), held: VersionVector.holding([(c, 1_000)]), nowMillis: 1_500)
        var batches = [UInt64]()
        var through: UInt64 = 1_000
        while let run = cursor.nextRun(local: local, nowMillis: 1_500) {
            #expect(run.log == c && run.from == through + 1)
            through += 1_024
            batches.append(cursor.sending(log: c, through: through, operations: 1_024, oldestMillis: 1, nowMillis: 1_500))
        }
        #expect(batches.count == 4 && through == 5_096)
        // The first batch applied, the receiver also holds what the origin, back, sent meanwhile.
        try cursor.acknowledged(batches[0], held: VersionVector.holding([(c, 3_000)]), nowMillis: 1_510)
        #expect(cursor.nextRun(local: local, nowMillis: 1_510) == nil)
        #expect(cursor.nextRun(local: local, nowMillis: 1_900) == nil)
    }

    /// Reports that come slower than the forwarding delay, each saying the receiver got more of
    /// the log from its origin, forward nothing: a late report is not a receiver that got none.
    @Test func reportsSlowerThanTheDelayForwardNothingWhileTheReceiverKeepsGettingTheLog() throws {
        var cursor = cursor(holding: VersionVector())
        var now: UInt64 = 1_000
        for step in 1...100 {
            now += 100
            let local = VersionVector.holding([(c, UInt64(step * 1_000))])
            #expect(cursor.nextRun(local: local, nowMillis: now) == nil, "step \(step)")
            // A probe answered every 700 ms, 500 operations behind.
            if step % 7 == 0 {
                try cursor.acknowledged(cursor.probing(nowMillis: now), held: VersionVector.holding([(c, UInt64(step * 1_000 - 500))]), nowMillis: now)
            }
        }
    }

    @Test func withNoDelayAnotherOriginsLogIsForwardedAtOnce() throws {
        var cursor = ReplicationCursor(
            receiverHolds: VersionVector(), window: 8, ownOrigin: a.origin, forwardDelayMillis: 0, nowMillis: 1_000)
        #expect(cursor.nextRun(local: VersionVector.holding([(c, 3)]), nowMillis: 1_000)?.from == 1)
    }

    /// What a snapshot from this node brought the receiver is this node's doing: forwarding the
    /// log past it does not wait again.
    @Test func aSnapshotThisNodeSentDoesNotRestartTheWait() throws {
        var cursor = cursor(holding: VersionVector.holding([(c, 10)]))
        var local = VersionVector.holding([(c, 5_000)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_500), held: VersionVector.holding([(c, 10)]), nowMillis: 1_500)
        #expect(cursor.nextRun(local: local, nowMillis: 1_500)?.from == 11)
        cursor.installedSnapshot(holding: VersionVector.holding([(c, 4_000)]), nowMillis: 1_600)
        local = VersionVector.holding([(c, 5_100)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_600)?.from == 4_001)
    }

    /// A receiver whose holding of another origin's log stops growing is forwarded it once the
    /// forwarding delay has passed, and then at the pace of acknowledgements, not one batch each
    /// delay: its holding grows again, but only by what this node sent.
    @Test func aReceiverCutOffFromTheOriginIsForwardedTheWholeLogWithoutPausing() throws {
        var cursor = cursor(holding: VersionVector.holding([(c, 1_000)]))
        let local = VersionVector.holding([(c, 10_000)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_250), held: VersionVector.holding([(c, 1_000)]), nowMillis: 1_250)
        #expect(cursor.nextRun(local: local, nowMillis: 1_499) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_500), held: VersionVector.holding([(c, 1_000)]), nowMillis: 1_500)
        var now: UInt64 = 1_500
        var held: UInt64 = 1_000
        while held < 10_000 {
            let next = cursor.nextRun(local: local, nowMillis: now)
            let run = try #require(next, "holding \(held) at \(now) ms")
            #expect(run.log == c && run.from == held + 1)
            let through = min(held + 1_024, 10_000)
            let batch = cursor.sending(log: c, through: through, operations: Int(through - held), oldestMillis: 1, nowMillis: now)
            now += 10
            held = through
            try cursor.acknowledged(batch, held: VersionVector.holding([(c, held)]), nowMillis: now)
        }
        #expect(now < 1_600, "forwarded at the pace of acknowledgements")
        #expect(cursor.nextRun(local: local, nowMillis: now) == nil && !cursor.probeDue(nowMillis: now + 1_000))
    }

    /// Forwarding stops once the receiver holds more of the log than this node sent it: the
    /// origin reaches it again.
    @Test func forwardingStopsWhenTheOriginReachesTheReceiverAgain() throws {
        var cursor = cursor(holding: VersionVector.holding([(c, 1_000)]))
        var local = VersionVector.holding([(c, 5_000)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 1_500), held: VersionVector.holding([(c, 1_000)]), nowMillis: 1_500)
        let next = cursor.nextRun(local: local, nowMillis: 1_500)
        let run = try #require(next)
        #expect(run.log == c && run.from == 1_001)
        let batch = cursor.sending(log: c, through: 2_024, operations: 1_024, oldestMillis: 1, nowMillis: 1_500)
        // Meanwhile the origin delivered up to 4,000.
        try cursor.acknowledged(batch, held: VersionVector.holding([(c, 4_000)]), nowMillis: 1_510)
        local = VersionVector.holding([(c, 6_000)])
        #expect(cursor.nextRun(local: local, nowMillis: 1_510) == nil)
        #expect(cursor.nextRun(local: local, nowMillis: 1_900) == nil)
        // Then nothing more arrives from the origin: the first report half a second after the
        // last growth resumes forwarding.
        try cursor.acknowledged(cursor.probing(nowMillis: 1_900), held: VersionVector.holding([(c, 4_000)]), nowMillis: 1_901)
        #expect(cursor.nextRun(local: local, nowMillis: 2_009) == nil)
        try cursor.acknowledged(cursor.probing(nowMillis: 2_009), held: VersionVector.holding([(c, 4_000)]), nowMillis: 2_009)
        #expect(cursor.nextRun(local: local, nowMillis: 2_010) == nil, "reported at 2,009 ms, less than half a second after 1,510")
        try cursor.acknowledged(cursor.probing(nowMillis: 2_010), held: VersionVector.holding([(c, 4_000)]), nowMillis: 2_010)
        #expect(cursor.nextRun(local: local, nowMillis: 2_010)?.from == 4_001)
    }

    /// Only what this node has held for the forwarding delay is forwarded, so a receiver cut off
    /// from the origin gets the log that much later. Once the origin reaches it again, its copies
    /// arrive first although they come slower than this node's would (100 ms after this node
    /// holds an operation, where this node's batches arrive at once and are acknowledged 10 ms
    /// on), and forwarding stops at the first report that shows them. This node holds c's log
    /// through its clock's millisecond; the origin is back at 3,000 ms.
    @Test func onlyWhatThisNodeHeldForTheDelayIsForwardedSoTheOriginsSlowerCopiesStopIt() throws {
        var cursor = cursor(holding: VersionVector.holding([(c, 1_000)]))
        var now: UInt64 = 1_000
        var brought: UInt64 = 1_000  // what this node's batches brought the receiver
        var unacknowledged = [UInt64]()
        var forwardedWhileCut: UInt64 = 0
        var broughtWhenTheOriginReturned: UInt64 = 0
        var forwardedAfter: UInt64 = 0
        func receiverHolds() -> VersionVector {
            VersionVector.holding([(c, max(brought, now >= 3_000 ? now - 100 : 0))])
        }
        while now < 8_000 {
            now += 10
            for batch in unacknowledged { try cursor.acknowledged(batch, held: receiverHolds(), nowMillis: now) }
            unacknowledged.removeAll()
            if now == 3_000 { broughtWhenTheOriginReturned = brought }
            let local = VersionVector.holding([(c, now)])
            while let run = cursor.nextRun(local: local, nowMillis: now) {
                #expect(run.log == c && run.through <= now - 500, "forwarded through \(run.through) at \(now) ms")
                let through = min(run.through, run.from + 99)
                unacknowledged.append(
                    cursor.sending(log: c, through: through, operations: Int(through - run.from + 1), oldestMillis: 1, nowMillis: now))
                if now < 3_000 { forwardedWhileCut += through - run.from + 1 } else if now >= 3_100 { forwardedAfter += through - run.from + 1 }
                brought = max(brought, through)
            }
            if cursor.probeDue(nowMillis: now) { unacknowledged.append(cursor.probing(nowMillis: now)) }
        }
        #expect(forwardedWhileCut > 1_000)
        // Forwarding kept up with the bound (what this node held half a second before, sampled
        // every 50 ms, acknowledged 10 ms on) until the origin came back.
        #expect(broughtWhenTheOriginReturned >= 2_400, "brought through \(broughtWhenTheOriginReturned) by 3,000 ms")
        #expect(forwardedAfter == 0)
    }

    @Test func theWindowBoundsBatchesInFlightAndAcknowledgementsOpenIt() throws {
        var cursor = cursor(holding: VersionVector(), window: 2)
        var local = VersionVector.holding([(a, 1)])
        let one = cursor.sending(log: a, through: 1, operations: 1, oldestMillis: 1)
        local = VersionVector.holding([(a, 2)])
        let two = cursor.sending(log: a, through: 2, operations: 1, oldestMillis: 2)
        local = VersionVector.holding([(a, 3)])
        #expect(!cursor.canSend && cursor.nextRun(local: local, nowMillis: 1_000) == nil)
        try cursor.acknowledged(two, held: VersionVector.holding([(a, 2)]), nowMillis: 1_000)
        #expect(cursor.receiverHolds[a] == 2 && cursor.inFlight.map(\.batchID) == [one])
        #expect(cursor.nextRun(local: local, nowMillis: 1_000)?.from == 3)
        #expect(throws: ReplicationCursor.UnknownBatch(batchID: 99)) { try cursor.acknowledged(99, held: VersionVector(), nowMillis: 1_000) }
        #expect(cursor.backlog(local: local) == 1)
    }

    @Test func theRetentionFloorIsWhatEveryPeerHolds() {
        let floor = VersionVector.floor(of: [VersionVector.holding([(a, 10), (c, 4)]), VersionVector.holding([(a, 7)]), VersionVector.holding([(a, 12), (c, 9)])])
        #expect(floor == [a: 7, c: 0], "a peer that holds none of c's log keeps all of it")
        #expect(VersionVector.floor(of: []) == nil)
    }
    /// A caller that wants the receiver's holdings as of now gets a probe once nothing is in
    /// flight, or the acknowledgement of the next batch; only an answer to a batch sent after
    /// the wish counts as of then (``ReplicationCursor/answeredSentMillis``).
    @Test func aWantedProbeGoesOutOnceNothingIsInFlightAndItsAnswerIsDatedBySending() throws {
        var cursor = cursor(holding: VersionVector.holding([(a, 3)]))
        #expect(cursor.answeredSentMillis == nil && !cursor.probeDue(nowMillis: 1_000), "nothing lacked: no probe")
        cursor.wantProbe()
        #expect(cursor.probeDue(nowMillis: 1_000), "wanted: due at once")
        let probe = cursor.probing(nowMillis: 1_010)
        #expect(!cursor.probeDue(nowMillis: 1_020), "one probe per wish")
        try cursor.acknowledged(probe, held: VersionVector.holding([(a, 3), (c, 9)]), nowMillis: 1_030)
        #expect(cursor.answeredSentMillis == 1_010 && cursor.receiverHolds[c] == 9)

        // A batch in flight: the wish waits for it, and a batch sent after the wish answers it.
        let more = VersionVector.holding([(a, 5)])
        _ = cursor.sending(log: a, through: 4, operations: 1, oldestMillis: 1, nowMillis: 1_100)
        cursor.wantProbe()
        #expect(!cursor.probeDue(nowMillis: 1_110), "a batch is in flight")
        try cursor.acknowledged(2, held: VersionVector.holding([(a, 4), (c, 9)]), nowMillis: 1_120)
        #expect(cursor.answeredSentMillis == 1_100, "that batch was sent before the wish")
        let next = cursor.nextRun(local: more, nowMillis: 1_130)
        let run = try #require(next)
        _ = cursor.sending(log: run.log, through: run.through, operations: 1, oldestMillis: 1, nowMillis: 1_130)
        #expect(!cursor.probeDue(nowMillis: 1_140), "the batch sent after the wish answers it")
        try cursor.acknowledged(3, held: VersionVector.holding([(a, 5), (c, 9)]), nowMillis: 1_150)
        #expect(cursor.answeredSentMillis == 1_130 && !cursor.probeDue(nowMillis: 1_160))
    }
}
