/// When a serving node moves its finished journal files into the SQLite log: only while it is
/// quiet, judged by how fast it has been committing operations over the last second. Pure: the
/// ``JournalMover`` feeds it readings of its clock and of the node's durable operations.
///
/// Moving competes with the commits for the disk (every move transaction and checkpoint ends in a
/// sync, and a commit's `fdatasync` waits for whatever the disk is writing) and for the CPU, so a
/// node under load keeps its journal, as a node did before files moved while serving, and moves
/// it once the load drops (or at its next start-up).
struct JournalMovePolicy: Equatable, Sendable {
    /// A reading: the node's durable operations at a moment of a monotonic clock.
    struct Sample: Equatable, Sendable {
        let nanos: UInt64
        let operations: UInt64
    }

    /// The span the commit rate is judged over.
    static let windowNanos: UInt64 = 1_000_000_000
    /// A shorter span than this is not judged: not quiet yet.
    static let minimumSpanNanos: UInt64 = 250_000_000
    /// How often a mover with nothing to do, or a busy node, is looked at again.
    static let idleIntervalNanos: UInt64 = 100_000_000
    /// At or below this commit rate the node counts as idle, and the mover works at its own pace.
    static let idleOperationsPerSecond = 100
    /// The least rest after a move step while the node is idle.
    static let idlePauseNanos: UInt64 = 15_000_000
    /// The least rest after a move step while the node serves (above
    /// ``idleOperationsPerSecond``): at most ten steps a second. In the bench's sweep a node moved
    /// about 4 MB of journal a second at 1,000-10,000 registrations/s, and at 20,000/s about the
    /// 3 MB a second it wrote.
    static let servingPauseNanos: UInt64 = 100_000_000
    /// Segments (of up to 4,096 operations, about 600 KB) per move transaction: each transaction
    /// and its checkpoint write about a megabyte, so a commit waits behind little.
    static let segmentsPerTransaction = 2
    /// Bytes of a finished file read per step, without the kernel's readahead: a whole file read
    /// at once kept the disk busy for 100-400 ms, and the commits waited behind it.
    static let readBytesPerStep = 1 << 20
    /// The default for ``quietOperationsPerSecond``: about 3 MB of journal a second.
    static let defaultQuietOperationsPerSecond = 20_000

    /// The highest commit rate, in operations a second, at which the node counts as quiet; 0
    /// never moves while serving.
    let quietOperationsPerSecond: Int
    /// Readings over the last ``windowNanos``, oldest first; the first may be older, so that
    /// the span judged covers the whole window once there are enough.
    private(set) var samples: [Sample] = []

    init(quietOperationsPerSecond: Int) {
        self.quietOperationsPerSecond = quietOperationsPerSecond
    }

    /// Takes a reading. Readings must come in clock order.
    mutating func observe(nanos: UInt64, operations: UInt64) {
        samples.append(Sample(nanos: nanos, operations: operations))
        while samples.count > 2, samples[1].nanos + Self.windowNanos <= nanos {
            samples.removeFirst()
        }
    }

    /// The commit rate over the readings, in operations a second; nil while they span less than
    /// ``minimumSpanNanos``.
    var operationsPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.nanos - first.nanos >= Self.minimumSpanNanos else {
            return nil
        }
        let operations = last.operations >= first.operations ? last.operations - first.operations : 0
        return Double(operations) * 1e9 / Double(last.nanos - first.nanos)
    }

    /// True when moving may go on: moving is enabled and the node committed at most
    /// ``quietOperationsPerSecond`` over the readings.
    var isQuiet: Bool {
        guard quietOperationsPerSecond > 0, let rate = operationsPerSecond else { return false }
        return rate <= Double(quietOperationsPerSecond)
    }

    /// How long to rest after a move step that took `stepNanos`: three times as long, so the mover
    /// works at most a quarter of the time and the commits find the disk to themselves the rest,
    /// and at least ``idlePauseNanos`` or, while the node serves, ``servingPauseNanos``. With rests
    /// as long as the steps (5 ms at least), single registrations at 5,000/s had a p99 of
    /// 2.7-3.1 ms while a node moved, against 1.9-2.1 ms with rests of three times the step and
    /// 15 ms at least (both with a sync per transaction as well as per checkpoint). Even that pace
    /// left the p99 at 1.3-1.7 ms (0.8 ms without moving); at the serving pace it was 0.8-1.1 ms.
    func pause(afterStepOf stepNanos: UInt64) -> UInt64 {
        let idle = (operationsPerSecond ?? 0) <= Double(Self.idleOperationsPerSecond)
        return max(3 * stepNanos, idle ? Self.idlePauseNanos : Self.servingPauseNanos)
    }
}
