import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// A vendor rule change waits until its node holds what every other member held when it arrived
/// (``CatchUpBarrier``): first every member's answer to a batch sent since, then the operations
/// those answers name; a member not reached, or anything missing at the deadline, refuses it.
@Suite struct CatchUpBarrierTests {
    let own = NodeID(trusted: "node-a")
    let b = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)
    let c = LogID(origin: NodeID(trusted: "node-c"), epoch: 1)
    let members: [NodeID: Member] = [
        NodeID(trusted: "node-a"): Member(address: "a:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-b"): Member(address: "b:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-c"): Member(address: "c:7400", addressAt: .zero, removed: false),
        NodeID(trusted: "node-d"): Member(address: "d:7400", addressAt: .zero, removed: true),
    ]

    func link(_ node: String, answeredAt: UInt64, holding holds: VersionVector, state: String = "streaming") -> PeerLinkStatus {
        var status = PeerLinkStatus(address: "\(node):7400")
        status.nodeID = node
        status.state = state
        status.answeredAtMillis = answeredAt
        status.peerHolds = holds.positions
        // Every link here streamed to its peer once.
        status.provenNodeID = node
        return status
    }

    @Test func waitsForAnAnswerSentSinceItAskedThenForWhatTheAnswersName() {
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 2_000)
        let bHolds = VersionVector.holding([(b, 7), (c, 2)])
        let cHolds = VersionVector.holding([(b, 5), (c, 4)])
        let own = VersionVector.holding([(b, 5), (c, 2)])
        // node-b's last answer is older than the request: it may hold more by now.
        var links = [link("node-b", answeredAt: 990, holding: bHolds), link("node-c", answeredAt: 1_010, holding: cHolds)]
        #expect(barrier.evaluate(links: links, members: members, own: self.own, holds: own, nowMillis: 1_020) == .waiting)
        #expect(barrier.needs == nil)
        links[0] = link("node-b", answeredAt: 1_015, holding: bHolds)
        #expect(barrier.evaluate(links: links, members: members, own: self.own, holds: own, nowMillis: 1_030) == .waiting)
        #expect(barrier.needs == VersionVector.holding([(b, 7), (c, 4)]), "every log at the most any member held")
        // What the members hold later is not waited for: the needs were fixed when all had answered.
        links[0] = link("node-b", answeredAt: 1_040, holding: VersionVector.holding([(b, 900), (c, 4)]))
        let partly = VersionVector.holding([(b, 7), (c, 3)])
        #expect(barrier.evaluate(links: links, members: members, own: self.own, holds: partly, nowMillis: 1_050) == .waiting)
        let all = VersionVector.holding([(b, 7), (c, 4)])
        #expect(barrier.evaluate(links: links, members: members, own: self.own, holds: all, nowMillis: 1_060) == .caughtUp)
    }

    /// A peer a link streamed to counts before its join reaches this node: it may hold
    /// registrations this node has not heard of. So does a link that never streamed, by its
    /// address: the node behind it may too. (The simulation found nodes deciding changes blind
    /// both ways.)
    @Test func aPeerWhoseJoinHasNotArrivedIsWaitedForAndAnAddressNotReachedRefuses() throws {
        let alone = [own: Member(address: "a:7400", addressAt: .zero, removed: false)]
        let bHolds = VersionVector.holding([(b, 4)])
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 2_000)
        var links = [link("node-b", answeredAt: 990, holding: bHolds)]
        #expect(barrier.evaluate(links: links, members: alone, own: own, holds: VersionVector(), nowMillis: 1_010) == .waiting)
        links[0] = link("node-b", answeredAt: 1_005, holding: bHolds)
        #expect(barrier.evaluate(links: links, members: alone, own: own, holds: VersionVector(), nowMillis: 1_020) == .waiting)
        #expect(barrier.needs == bHolds)
        #expect(barrier.evaluate(links: links, members: alone, own: own, holds: bHolds, nowMillis: 1_030) == .caughtUp)

        var unnamed = PeerLinkStatus(address: "10.0.0.9:7400")
        unnamed.state = "connecting"
        unnamed.configured = true
        var first = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 2_000)
        guard case .refused(let error) = first.evaluate(links: links + [unnamed], members: alone, own: own, holds: bHolds, nowMillis: 1_000)
        else { return #expect(Bool(false), "decided with an address not reached") }
        #expect(error.message.contains("not reached: 10.0.0.9:7400") && error.message.contains("--peers"), "\(error.message)")
    }

    /// A member this node does not stream to refuses the change at once; one that has not
    /// answered since, once the answers are due.
    @Test func aMemberNotReachedRefusesAtOnceAndASilentOneOnceTheAnswersAreDue() throws {
        let holds = VersionVector.holding([(b, 3)])
        let answered = link("node-c", answeredAt: 1_001, holding: VersionVector.holding([(c, 1)]))
        for links in [[answered], [link("node-b", answeredAt: 1_001, holding: holds, state: "connecting"), answered]] {
            var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 60_000)
            let outcome = barrier.evaluate(links: links, members: members, own: own, holds: holds, nowMillis: 1_000)
            guard case .refused(let error) = outcome else {
                Issue.record("a member not reached is waited for: \(outcome)")
                continue
            }
            #expect(error.code == .unavailable && error.retryable && error.message.contains("after 0 ms, not reached: node-b;"), "\(error)")
        }
        let deadline = 1_000 + CatchUpBarrier.answerWaitMillis
        let silent = [link("node-b", answeredAt: 999, holding: holds), answered]
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 60_000)
        #expect(barrier.evaluate(links: silent, members: members, own: own, holds: holds, nowMillis: deadline - 1) == .waiting)
        let outcome = barrier.evaluate(links: silent, members: members, own: own, holds: holds, nowMillis: deadline)
        guard case .refused(let error) = outcome else {
            Issue.record("not refused once the answers are due: \(outcome)")
            return
        }
        #expect(error.code == .unavailable && error.retryable, "\(error)")
        #expect(error.message.contains("after \(CatchUpBarrier.answerWaitMillis) ms, no answer from node-b;"), "\(error.message)")
    }

    /// Once all have answered, the node has the causal timeout to get what they held; 0 refuses
    /// at once a node that lacks some.
    @Test func operationsStillMissingRefuseOnceTheCatchUpWaitAfterTheLastAnswerPasses() throws {
        let links = [
            link("node-b", answeredAt: 1_001, holding: VersionVector.holding([(b, 3)])),
            link("node-c", answeredAt: 1_001, holding: VersionVector.holding([(c, 1)])),
        ]
        let lacking = VersionVector.holding([(b, 1), (c, 1)])
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 500)
        #expect(barrier.evaluate(links: links, members: members, own: own, holds: lacking, nowMillis: 1_200) == .waiting)
        #expect(barrier.evaluate(links: links, members: members, own: own, holds: lacking, nowMillis: 1_699) == .waiting)
        let outcome = barrier.evaluate(links: links, members: members, own: own, holds: lacking, nowMillis: 1_700)
        guard case .refused(let error) = outcome else {
            Issue.record("\(outcome)")
            return
        }
        #expect(error.code == .unavailable && error.retryable)
        #expect(error.message.contains("after 700 ms, 2 operations its peers held are still missing here"), "\(error.message)")

        var atOnce = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 0)
        guard case .refused = atOnce.evaluate(links: links, members: members, own: own, holds: lacking, nowMillis: 1_002) else {
            Issue.record("a causal timeout of 0 waits")
            return
        }
        var holding = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 0)
        let all = VersionVector.holding([(b, 3), (c, 1)])
        #expect(holding.evaluate(links: links, members: members, own: own, holds: all, nowMillis: 1_002) == .caughtUp)
    }

    /// A member this node learns of while it catches up (it joined through another node) is
    /// asked too: what it alone holds is waited for.
    @Test func aMemberLearnedOfMeanwhileIsAskedToo() {
        let e = LogID(origin: NodeID(trusted: "node-e"), epoch: 1)
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 2_000)
        var links = [
            link("node-b", answeredAt: 1_001, holding: VersionVector.holding([(b, 2)])),
            link("node-c", answeredAt: 1_001, holding: VersionVector.holding([(c, 2)])),
        ]
        let holds = VersionVector.holding([(b, 2), (c, 1)])
        #expect(barrier.evaluate(links: links, members: members, own: own, holds: holds, nowMillis: 1_010) == .waiting)
        #expect(barrier.needs == VersionVector.holding([(b, 2), (c, 2)]))
        var more = members
        more[NodeID(trusted: "node-e")] = Member(address: "e:7400", addressAt: .zero, removed: false)
        links.append(link("node-e", answeredAt: 1_020, holding: VersionVector.holding([(e, 4)])))
        let caught = VersionVector.holding([(b, 2), (c, 2)])
        #expect(barrier.evaluate(links: links, members: more, own: own, holds: caught, nowMillis: 1_030) == .waiting, "node-e's log is missing")
        #expect(barrier.needs == VersionVector.holding([(b, 2), (c, 2), (e, 4)]))
        let all = VersionVector.holding([(b, 2), (c, 2), (e, 4)])
        #expect(barrier.evaluate(links: links, members: more, own: own, holds: all, nowMillis: 1_040) == .caughtUp)
    }

    @Test func aRemovedMemberIsNotWaitedForAndANodeAloneHasCaughtUp() {
        var barrier = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 0)
        let links = [
            link("node-b", answeredAt: 1_000, holding: VersionVector()), link("node-c", answeredAt: 1_000, holding: VersionVector()),
        ]
        #expect(barrier.evaluate(links: links, members: members, own: own, holds: VersionVector(), nowMillis: 1_000) == .caughtUp)
        var alone = CatchUpBarrier(askedAtMillis: 1_000, catchUpWaitMillis: 0)
        #expect(alone.evaluate(links: [], members: [own: members[own]!], own: own, holds: VersionVector(), nowMillis: 1_000) == .caughtUp)
    }
}
