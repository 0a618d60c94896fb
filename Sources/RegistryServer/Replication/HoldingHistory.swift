/// What this node held of one log over the last ``span`` milliseconds, sampled, so that a sender
/// can tell which operations of the log it has held for at least that long (see
/// ``ReplicationCursor``: another origin's operations are forwarded only once this node has held
/// them for the forwarding delay, so that the origin's own copies, one hop away, arrive first).
///
/// Samples are taken at most every ``spacing`` milliseconds: an operation first seen between two
/// samples counts from the later one, so it may count later than it could, never sooner. It keeps
/// at most about `span / spacing + 2` samples. Times are the caller's clock (the node's wall
/// clock): one that jumps forward makes what is held look older by the jump.
struct HoldingHistory: Sendable {
    private struct Sample: Sendable {
        let millis: UInt64
        let sequence: UInt64
    }

    /// How long an operation must have been held to count.
    let span: UInt64
    /// The least time between two samples.
    let spacing: UInt64
    /// Oldest first; the first is the newest sample at least ``span`` old once there is one.
    private var samples: [Sample] = []

    init(span: UInt64, spacing: UInt64) {
        self.span = span
        self.spacing = spacing
    }

    /// Records that this node holds the log through `sequence` at `nowMillis`, and returns the
    /// last sequence it has held since ``span`` ago or earlier: 0 when it held none that long
    /// (this history began less than ``span`` ago). A clock that went back starts the history
    /// again, as though everything held was new: operations count later, never sooner.
    mutating func heldForSpan(holding sequence: UInt64, nowMillis: UInt64) -> UInt64 {
        guard span > 0 else { return sequence }
        if let last = samples.last, nowMillis < last.millis { samples.removeAll() }
        if let last = samples.last {
            if sequence > last.sequence, nowMillis >= last.millis + spacing { samples.append(Sample(millis: nowMillis, sequence: sequence)) }
        } else {
            samples.append(Sample(millis: nowMillis, sequence: sequence))
        }
        while samples.count >= 2, samples[1].millis + span <= nowMillis { samples.removeFirst() }
        guard let oldest = samples.first, oldest.millis + span <= nowMillis else { return 0 }
        return oldest.sequence
    }
}
