/// When each step of an open-loop run is meant to be sent: a fixed rate of registrations per
/// second, independent of how fast answers come back. Latency is measured from these intended
/// times, so a stalled server is charged for every request it delayed (no coordinated omission).
public struct OpenLoopSchedule: Sendable {
    /// Registrations per second.
    public let rate: Double
    /// Monotonic nanoseconds of the first step.
    public let start: UInt64
    private var sentItems: UInt64 = 0

    public init(rate: Double, start: UInt64) {
        precondition(rate > 0, "rate must be positive")
        self.rate = rate
        self.start = start
    }

    /// The intended send time of the next step.
    public var nextIntended: UInt64 {
        start + UInt64((Double(sentItems) * 1e9 / rate).rounded())
    }

    /// Records that the next step carries `items` registrations and returns its intended time.
    public mutating func take(items: Int) -> UInt64 {
        let intended = nextIntended
        sentItems += UInt64(items)
        return intended
    }

    /// Registrations the schedule has handed out.
    public var scheduledItems: UInt64 { sentItems }
}
