import Dispatch
import Platform

/// The clock a held vendor rule change reads, and how it is asked again (``CatchUpBarrier``):
/// ``system`` reads the monotonic clock and asks again every ``CatchUpBarrier/pollMillis`` on a
/// timer. An embedder that drives time itself passes its own: the cluster simulation gives the
/// node's simulated clock, and runs the polls between its steps, so that a seed replays exactly.
public struct CatchUpTiming: Sendable {
    /// Milliseconds of the clock the links date their answers by (``PeerLinkStatus/answeredAtMillis``:
    /// the monotonic clock, or the simulation's simulated time): a change's wait compares the two.
    let nowMillis: @Sendable () -> UInt64
    /// Runs the poll it is given once, about ``CatchUpBarrier/pollMillis`` later.
    let schedule: @Sendable (_ poll: @escaping @Sendable () -> Void) -> Void

    public init(nowMillis: @escaping @Sendable () -> UInt64, schedule: @escaping @Sendable (_ poll: @escaping @Sendable () -> Void) -> Void) {
        self.nowMillis = nowMillis
        self.schedule = schedule
    }

    /// The monotonic clock, and a timer on a global queue.
    public static let system = CatchUpTiming(nowMillis: SystemClock.monotonicMillis) { poll in
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(CatchUpBarrier.pollMillis), execute: poll)
    }
}
