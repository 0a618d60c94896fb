/// When a node takes its next snapshot, as a plain value: once `everyOperations` operations
/// became durable since the last one, and at least as many as the last one covered; or once
/// `everySeconds` passed with anything new (0 turns either rule off); never while one is being
/// taken, nor for a while after one failed: 10 s after the first failure in a row, twice that
/// after each next, up to 10 minutes. A failure that lasts (a disk too full for a snapshot, a
/// damaged file) would otherwise start one at every commit, each forking and writing the whole
/// state again.
///
/// Why the second rule: a snapshot is built from the last one, so its cost grows with the
/// registry (a 10M-device node's takes a minute and more), and a fixed count would have a node
/// under heavy writes snapshot without pause. Waiting for as many operations as the last one
/// covered (as Redis rewrites its append-only file once it has doubled), a snapshot costs about
/// two records loaded or written and one operation replayed per operation logged, at any size,
/// and a restart replays at most about a snapshot's worth of journal after loading it.
/// BENCHMARKS.md ("Against the previous revision") measures what snapshots cost a saturated node.
struct SnapshotPolicy: Sendable, Equatable {
    let everyOperations: UInt64
    let everySeconds: UInt64
    /// Durable operations the last snapshot covered.
    private(set) var coveredOperations: UInt64
    /// When the last snapshot finished (or the node started), in uptime nanoseconds.
    private(set) var lastNanos: UInt64
    private(set) var isTaking = false
    /// Snapshots that failed in a row.
    private(set) var failures = 0
    /// Until then (uptime nanoseconds) the rules start none: the last one failed.
    private(set) var retryNanos: UInt64 = 0

    static let firstRetryNanos: UInt64 = 10_000_000_000
    static let maxRetryNanos: UInt64 = 600_000_000_000

    init(everyOperations: UInt64, everySeconds: UInt64, coveredOperations: UInt64, nowNanos: UInt64 = 0) {
        self.everyOperations = everyOperations
        self.everySeconds = everySeconds
        self.coveredOperations = coveredOperations
        self.lastNanos = nowNanos
    }

    /// Whether a snapshot should start now, with `durableOperations` durable; when it should, it
    /// counts as started.
    mutating func shouldStart(durableOperations: UInt64, nowNanos: UInt64) -> Bool {
        guard !isTaking, durableOperations > coveredOperations, nowNanos >= retryNanos else { return false }
        let byCount = everyOperations > 0 && durableOperations - coveredOperations >= max(everyOperations, coveredOperations)
        let byTime = everySeconds > 0 && nowNanos &- lastNanos >= everySeconds * 1_000_000_000
        guard byCount || byTime else { return false }
        isTaking = true
        return true
    }

    /// A snapshot was asked for by hand: it counts as started unless one is being taken.
    mutating func startByRequest() -> Bool {
        guard !isTaking else { return false }
        isTaking = true
        return true
    }

    /// A snapshot taken outside ``shouldStart(durableOperations:nowNanos:)`` and
    /// ``finished(covering:nowNanos:)`` (a peer's, installed; one in the foreground) covers
    /// `operations`.
    mutating func covers(_ operations: UInt64, nowNanos: UInt64) {
        coveredOperations = max(coveredOperations, operations)
        lastNanos = nowNanos
        (failures, retryNanos) = (0, 0)
    }

    /// The snapshot finished, covering `operations` (nil: it failed, or found another running).
    mutating func finished(covering operations: UInt64?, nowNanos: UInt64) {
        isTaking = false
        guard let operations else {
            failures += 1
            retryNanos = nowNanos + min(Self.firstRetryNanos << min(failures - 1, 16), Self.maxRetryNanos)
            return
        }
        coveredOperations = max(coveredOperations, operations)
        lastNanos = nowNanos
        (failures, retryNanos) = (0, 0)
    }
}
