/// Delays between reconnection attempts: exponential, capped, with equal jitter (each delay is
/// drawn uniformly between half and all of the exponential step), so that peers that lost each
/// other at the same moment do not reconnect in lockstep. A plain value; the caller passes the
/// random source, so it is deterministic under test.
struct Backoff: Sendable {
    let initialMillis: UInt64
    let maxMillis: UInt64
    private(set) var failures: UInt32 = 0

    init(initialMillis: UInt64 = 100, maxMillis: UInt64 = 5_000) {
        precondition(initialMillis > 0 && maxMillis >= initialMillis)
        self.initialMillis = initialMillis
        self.maxMillis = maxMillis
    }

    /// The delay before the next attempt, after one more failure.
    mutating func nextDelayMillis(using generator: inout some RandomNumberGenerator) -> UInt64 {
        let step = min(maxMillis, initialMillis << min(UInt64(failures), 20))
        failures &+= 1
        return step / 2 + UInt64.random(in: 0...(step - step / 2), using: &generator)
    }

    /// A connection succeeded: the next failure starts over from the initial delay.
    mutating func reset() {
        failures = 0
    }
}
