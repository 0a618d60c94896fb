import RegistryCore
import RegistryWire

/// Whether a node may decide a vendor rule change yet: only once it holds everything each of its
/// peers (``ClusterPeers/catchingUp(links:members:own:)``: the other members, nodes its links
/// streamed to whose join has not reached it, and every `--peers` address its link has not
/// streamed to) held when the change arrived. The change and its move are worked out from the devices
/// the deciding node holds (``NodeState/decideVendor(_:wallMillis:operations:)``); a device
/// registered elsewhere that has not reached it would be left out of the move, and the same
/// phone would get a second ID under the vendor the change files its app under.
///
/// A plain value, asked again as the links answer: first every peer's link must answer
/// a batch sent at or after ``askedAtMillis`` (``PeerLinkStatus/answeredAtMillis``, a probe the
/// node asks for), within ``answerWaitMillis`` (a peer it does not stream to refuses the change
/// at once); the answers fix what the node must hold,
/// ``needs``, and it must hold it within `catchUpWaitMillis` of the last answer (the causal
/// timeout: 0 refuses at once a node that lacks some). Otherwise the change is refused,
/// retryably. Registrations another node takes after it answered are the change's window
/// (docs/identity.md, "The window").
struct CatchUpBarrier: Equatable, Sendable {
    /// How long the peers have to answer: a round trip normally. With the default
    /// `--causal-timeout` (2 s) for the wait that follows, the answer, or the refusal, reaches a
    /// client that waits registryctl's default 5 s.
    static let answerWaitMillis: UInt64 = 2_000
    /// How often a held change asks again.
    static let pollMillis = 10

    /// When the change arrived (the node's monotonic clock, ms).
    let askedAtMillis: UInt64
    /// How long, once every peer answered, the node waits for what they held.
    let catchUpWaitMillis: UInt64
    /// What every peer held when it answered, once all have.
    private(set) var needs: VersionVector?
    /// The peers whose answers ``needs`` joins.
    private var answered: Set<NodeID> = []
    /// When the node must hold ``needs`` by.
    private var deadlineMillis: UInt64

    init(askedAtMillis: UInt64, catchUpWaitMillis: UInt64) {
        self.askedAtMillis = askedAtMillis
        self.catchUpWaitMillis = catchUpWaitMillis
        self.deadlineMillis = askedAtMillis + Self.answerWaitMillis
    }

    enum Outcome: Equatable, Sendable {
        /// Some peer has not answered, or the node lacks some of what they held.
        case waiting
        /// The node holds all that every peer held when asked: decide.
        case caughtUp
        /// The deadline passed first.
        case refused(WireError)
    }

    /// Whether the change may be decided now, from the links' statuses, the members, and what
    /// this node (`own`) holds (`holds`).
    mutating func evaluate(
        links: [PeerLinkStatus], members: [NodeID: Member], own: NodeID, holds: VersionVector, nowMillis: UInt64
    ) -> Outcome {
        // Registrations any peer holds count (ClusterPeers.catchingUp). One this node learned of
        // while it caught up (it joined through another node) is asked too.
        let peers = ClusterPeers.catchingUp(links: links, members: members, own: own)
        if needs != nil, !peers.nodes.isSubset(of: answered) || !peers.addresses.isEmpty {
            needs = nil
        }
        if needs == nil {
            var needed = VersionVector()
            // A --peers address whose link has not streamed to the node there is a peer not reached.
            var (unreached, silent) = (peers.addresses.sorted(), [String]())
            for node in peers.nodes.sorted() {
                guard let link = links.first(where: { $0.nodeID == node.value && $0.state == "streaming" }) else {
                    unreached.append(node.value)
                    continue
                }
                // An answer to a batch sent as the change arrived, or later: the peer read it, so
                // what it held then is what it held after the change arrived (give or take the
                // part of a millisecond that the clock does not tell apart).
                guard link.answeredAtMillis >= askedAtMillis, let held = try? VersionVector(positions: link.peerHolds) else {
                    silent.append(node.value)
                    continue
                }
                needed = needed.joined(with: held)
            }
            // As a move does (LinkedPeers.holdMovesBackFromOldMembers): a member this node does
            // not stream to now is not waited for.
            guard unreached.isEmpty else { return .refused(refusal("not reached: \(unreached.joined(separator: ", "))", nowMillis: nowMillis)) }
            guard silent.isEmpty else {
                guard nowMillis >= deadlineMillis else { return .waiting }
                return .refused(refusal("no answer from \(silent.joined(separator: ", "))", nowMillis: nowMillis))
            }
            needs = needed
            answered = peers.nodes
            deadlineMillis = nowMillis + catchUpWaitMillis
        }
        guard let needs, !holds.covers(needs) else { return .caughtUp }
        guard nowMillis >= deadlineMillis else { return .waiting }
        return .refused(refusal("\(needs.operationsAhead(of: holds)) operations its peers held are still missing here", nowMillis: nowMillis))
    }

    private func refusal(_ why: String, nowMillis: UInt64) -> WireError {
        // A clock that stepped back since the change arrived reads as no time waited.
        let waited = nowMillis >= askedAtMillis ? nowMillis - askedAtMillis : 0
        return WireError(
            code: .unavailable,
            message:
                "a vendor rule change is decided once this node holds what every other node of the cluster holds, so that its move takes in every device registered; after \(waited) ms, \(why); retry, remove a member gone for good (registryctl cluster remove), or take an address nothing answers at out of --peers",
            retryable: true)
    }
}
