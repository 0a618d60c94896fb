/// The p99 of each second of a run's measured window, as the live progress line showed it, and
/// what they say together.
///
/// A run's p99 over its whole window cannot tell a tail that every second has from a few
/// seconds that stalled: a 40 ms stall in one second of fifteen can set the run's p99 alone. The
/// median of the seconds' p99s says what an ordinary second looked like, the worst says how bad
/// the stalls were, and ``secondsOver(_:)`` how many seconds missed an objective.
public struct PerSecondLatency: Codable, Equatable, Sendable {
    /// One progress interval, about a second, that ended after the warm-up.
    public struct Second: Codable, Equatable, Sendable {
        /// Seconds since the run started, at the interval's end.
        public let elapsedSeconds: Double
        /// Registrations acknowledged in the interval.
        public let acknowledged: UInt64
        /// The interval's p99 latency in nanoseconds.
        public let p99: UInt64

        enum CodingKeys: String, CodingKey {
            case acknowledged
            case elapsedSeconds = "elapsed_s"
            case p99 = "p99_ns"
        }

        public init(elapsedSeconds: Double, acknowledged: UInt64, p99: UInt64) {
            self.elapsedSeconds = elapsedSeconds
            self.acknowledged = acknowledged
            self.p99 = p99
        }
    }

    public let seconds: [Second]
    /// The middle of the seconds' p99s (the higher middle one for an even count); nil without
    /// seconds. Kept, not derived on read, so that the JSON report carries it.
    public let medianP99: UInt64?
    /// The highest of the seconds' p99s; nil without seconds.
    public let worstP99: UInt64?

    enum CodingKeys: String, CodingKey {
        case seconds
        case medianP99 = "median_p99_ns"
        case worstP99 = "worst_p99_ns"
    }

    public init(seconds: [Second]) {
        self.seconds = seconds
        let sorted = seconds.map(\.p99).sorted()
        medianP99 = sorted.isEmpty ? nil : sorted[sorted.count / 2]
        worstP99 = sorted.last
    }

    /// How many seconds had a p99 above `nanoseconds`.
    public func secondsOver(_ nanoseconds: UInt64) -> Int {
        seconds.count { $0.p99 > nanoseconds }
    }
}
