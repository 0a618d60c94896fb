import RegistryCore

/// The writes that wait for peers (`--ack-replicas`), as a plain value: each waits until `needed`
/// peers hold this node's own log through its last operation, or until its deadline. Peers'
/// positions come from their acknowledgements; time is passed in, so it is deterministic under
/// test.
struct ReplicaAcknowledgements<Waiter> {
    private struct Pending {
        let waiter: Waiter
        /// The last sequence of this node's own log that the write made.
        let through: UInt64
        let needed: Int
        let deadlineMillis: UInt64
    }

    /// For each peer, how far it holds this node's own current log.
    private(set) var peerHolds: [NodeID: UInt64] = [:]
    private var pending: [Pending] = []

    var waiting: Int { pending.count }

    /// How many peers hold the own log through `sequence`.
    func peers(holding sequence: UInt64) -> Int {
        peerHolds.values.count { $0 >= sequence }
    }

    /// A write durable here through own sequence `through` waits for `needed` peers until
    /// `deadlineMillis`; returns it at once when enough peers hold it already.
    mutating func wait(_ waiter: Waiter, through: UInt64, needed: Int, deadlineMillis: UInt64) -> Waiter? {
        if peers(holding: through) >= needed { return waiter }
        pending.append(Pending(waiter: waiter, through: through, needed: needed, deadlineMillis: deadlineMillis))
        return nil
    }

    /// `peer` holds the own log through `sequence`; returns the writes that now have enough peers.
    /// An acknowledgement only adds to what a peer holds; a welcome (`restated`) says it anew, so
    /// a peer that lost its data no longer counts for what it held before.
    mutating func peer(_ peer: NodeID, holdsThrough sequence: UInt64, restated: Bool = false) -> [Waiter] {
        if restated {
            peerHolds[peer] = sequence
        } else {
            guard sequence > peerHolds[peer] ?? 0 else { return [] }
            peerHolds[peer] = sequence
        }
        let holds = Array(peerHolds.values)
        return take { item in holds.count { $0 >= item.through } >= item.needed }
    }

    /// The writes whose deadline has passed at `nowMillis`.
    mutating func expired(nowMillis: UInt64) -> [Waiter] {
        take { $0.deadlineMillis <= nowMillis }
    }

    private mutating func take(where ready: (Pending) -> Bool) -> [Waiter] {
        var taken = [Waiter]()
        pending.removeAll { item in
            guard ready(item) else { return false }
            taken.append(item.waiter)
            return true
        }
        return taken
    }
}
