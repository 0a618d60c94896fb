/// When the log writer waits before a group commit so that more operations join it: a pure
/// rule, which ``CommitPipeline``'s commit loop carries out.
///
/// Every commit costs the same write and sync however many operations it carries, so a pass
/// that follows another directly (the writer is busy back to back) and finds fewer than
/// ``worthOperations`` waiting first waits ``delayMicros`` for more. A first pass after the
/// writer was idle never waits: a quiet node's latency stays as it was. The defaults, and what
/// they cost single requests at low rates, are measured in docs/performance.md.
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
