import Histogram

/// Latencies in nanoseconds in an HdrHistogram (3 significant digits, 1 µs to 10 minutes).
public struct LatencyRecorder: Sendable {
    public private(set) var histogram = Histogram<UInt64>(
        lowestDiscernibleValue: 1_000, highestTrackableValue: 600_000_000_000, numberOfSignificantValueDigits: .three)

    public init() {}

    /// Records `count` requests that each took `nanoseconds`; values outside the range are clamped.
    public mutating func record(_ nanoseconds: UInt64, count: Int = 1) {
        let value = min(max(nanoseconds, 1_000), histogram.highestTrackableValue)
        _ = histogram.record(value, count: UInt64(count))
    }

    public mutating func add(_ other: LatencyRecorder) {
        histogram.add(other.histogram)
    }

    public var count: UInt64 { histogram.totalCount }

    public func value(atPercentile percentile: Double) -> UInt64 {
        count == 0 ? 0 : (percentile >= 100 ? histogram.max : histogram.valueAtPercentile(percentile))
    }

    /// The percentiles the report shows.
    public var summary: LatencySummary {
        LatencySummary(
            count: count, p50: value(atPercentile: 50), p90: value(atPercentile: 90), p99: value(atPercentile: 99),
            p999: value(atPercentile: 99.9), p9999: value(atPercentile: 99.99), max: value(atPercentile: 100),
            mean: count == 0 ? 0 : histogram.mean)
    }
}

/// Percentiles of one latency distribution, in nanoseconds.
public struct LatencySummary: Codable, Equatable, Sendable {
    public let count: UInt64
    public let p50: UInt64
    public let p90: UInt64
    public let p99: UInt64
    public let p999: UInt64
    public let p9999: UInt64
    public let max: UInt64
    public let mean: Double

    enum CodingKeys: String, CodingKey {
        case count
        case p50 = "p50_ns"
        case p90 = "p90_ns"
        case p99 = "p99_ns"
        case p999 = "p99_9_ns"
        case p9999 = "p99_99_ns"
        case max = "max_ns"
        case mean = "mean_ns"
    }
}
