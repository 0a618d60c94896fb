import LoadGeneration

/// What a shard measured, over one progress interval or the whole run.
struct ShardTotals: Sendable {
    var latency = LatencyRecorder()
    var service = LatencyRecorder()
    var schedulerLag = LatencyRecorder()
    /// Registrations acknowledged inside the measurement window.
    var acknowledged: UInt64 = 0
    var failed: UInt64 = 0
    /// Failed registrations by error code name.
    var errors: [String: UInt64] = [:]

    mutating func add(_ other: ShardTotals) {
        latency.add(other.latency)
        service.add(other.service)
        schedulerLag.add(other.schedulerLag)
        acknowledged += other.acknowledged
        failed += other.failed
        errors.merge(other.errors, uniquingKeysWith: +)
    }

    mutating func recordFailure(_ code: String, count: UInt64 = 1) {
        failed += count
        errors[code, default: 0] += count
    }
}
