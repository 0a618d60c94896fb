/// When the log writer waits before a group commit so that more operations join it: a pure
/// rule, which ``RegistryEngine``'s commit loop carries out.
///
/// Every commit costs the same `pwrite` and `fdatasync` however many operations it carries:
/// about 70-100 µs of the guest's CPU on this project's VM, most of it in the kernel, and two
/// requests to the virtual disk, each of which also costs CPU time that the hypervisor takes
/// while it serves them (steal). In a closed loop the queue is deep and each commit carries
/// thousands; in an open loop at 70% of that maximum it carried one batch. So a pass that
/// follows another directly (the writer is busy back to back) and finds fewer than
/// ``worthOperations`` waiting first waits ``delayMicros`` for more. A first pass after the
/// writer was idle never waits: a quiet node's latency stays as it was.
///
/// Measured in open loops in batches of 100 on a sized node. At 408,230 registrations/s a delay
/// of 200 µs for fewer than 200 operations cut commits from 3,350 to 1,600 a second and the
/// machine from 72-80% to 64-69% busy, for about 0.25 ms more at p50 (p99 median 2.80 ms over 9
/// runs without, 2.23 ms over 6 with). Without a delay at 385,000/s, 2,600 commits a second
/// cost 5% of the machine in steal and the p99 was 13 ms. The default, 300 µs for fewer than
/// 400 operations, keeps the commits fewer as the rate grows: at 460,000/s it had 0.2-0.7%
/// steal and a p99 of 3.5-6.6 ms where 200 µs for fewer than 200 had 2.0-4.0% and 9.7-11.1 ms,
/// and at 385,000/s a p99 of 2.1-2.8 ms against 2.7-3.3 ms, for up to 0.3 ms more at p50
/// (three runs each, alternating; 400 µs for fewer than 400: 2.1-3.0 ms and 3.5-4.0 ms, and
/// one run with a 0.2 s stall). It costs single requests at low rates, where a wait gathers
/// little: at 5,000 a second their p99 was 1.5-2.3 ms (median of five runs 2.1) against
/// 0.9-1.9 ms (median 1.9) with 200 µs, and at 10,000 1.80 against 1.54 ms; a node that serves
/// mostly such traffic may do better with `--commit-delay-us 200`.
public struct CommitPacing: Equatable, Sendable {
    /// The wait, in microseconds; 0 never waits.
    public var delayMicros: UInt32
    /// Operations a commit is worth on its own: with this many waiting, no pass waits.
    public var worthOperations: Int

    public static let `default` = CommitPacing(delayMicros: 300, worthOperations: 400)
    /// The most a commit may be delayed, in microseconds.
    public static let maxDelayMicros: UInt32 = 10_000

    public init(delayMicros: UInt32, worthOperations: Int) {
        self.delayMicros = delayMicros
        self.worthOperations = worthOperations
    }

    /// How long the pass about to take `pendingOperations` waits first, in microseconds.
    /// `followsAnotherPass` is false for the first pass after the writer was idle.
    public func delay(pendingOperations: Int, followsAnotherPass: Bool) -> UInt32 {
        guard followsAnotherPass, pendingOperations < worthOperations else { return 0 }
        return delayMicros
    }
}
