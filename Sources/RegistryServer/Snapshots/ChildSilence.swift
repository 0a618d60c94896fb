import Platform

/// Whether a forked snapshot's child that has sent nothing for a whole window is stuck, or only
/// slow. The child runs at `SCHED_IDLE`: on a node that keeps every CPU busy it gets almost none,
/// and that is no reason to end it, as a snapshot started again would fork into the same wait
/// (and the node holds its new claims aside until the child has read the claim index).
///
/// At the end of each window without a byte the child is stuck when
/// - it has had a window's worth of CPU time since it last sent bytes: a loop; or
/// - it had no CPU time in the window and does not want any (not runnable): blocked for good, for
///   example on a lock another thread of the node held at the fork.
///
/// Otherwise it is working, or waiting for a CPU, and the wait goes on. Pure: ``ForkedSnapshot``
/// reads the child's ``ProcessState``.
struct ChildSilence: Equatable {
    /// The window, in clock ticks of CPU time.
    let windowTicks: UInt64
    /// The child's CPU time when it was last seen sending bytes (0 at the fork).
    private var ticksAtBytes: UInt64 = 0
    /// Its CPU time at the end of the last silent window since then.
    private var ticksAtSilentWindow: UInt64?

    init(windowMillis: Int32, ticksPerSecond: UInt64 = ProcessState.ticksPerSecond) {
        windowTicks = max(1, UInt64(windowMillis) * ticksPerSecond / 1_000)
    }

    /// The child sent bytes; `state` is what it was then.
    mutating func sent(_ state: ProcessState) {
        ticksAtBytes = state.cpuTicks
        ticksAtSilentWindow = nil
    }

    /// A whole window passed without bytes, and the child is now in `state`.
    mutating func isStuck(now state: ProcessState) -> Bool {
        defer { ticksAtSilentWindow = state.cpuTicks }
        if state.cpuTicks &- ticksAtBytes >= windowTicks { return true }
        let inWindow = state.cpuTicks &- (ticksAtSilentWindow ?? ticksAtBytes)
        return inWindow == 0 && !state.isRunnable
    }
}
