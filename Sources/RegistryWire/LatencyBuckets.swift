import Platform

/// Durations counted in log-scale buckets, cumulatively: cheap to record (one increment), and
/// two readings of it subtract (``since(_:)``) into the distribution of the time between them,
/// which one-off percentiles could not.
///
/// A node keeps one for its durable commits since it started and sends it in `Stats`; see
/// `LatencyBuckets` in `admin.proto`. The standard buckets are four per doubling from 16 µs to
/// about 1 s (so a bucket's upper bound is at most 19% above anything it holds), then one for
/// everything longer.
public struct LatencyBuckets: Hashable, Sendable {
    /// Inclusive upper bounds in microseconds, ascending; the last is `UInt64.max`.
    public let upperBoundsMicros: [UInt64]
    /// How many durations fell in each bucket, one count per bound.
    public private(set) var counts: [UInt64]

    /// The standard bounds: 16 µs × 2^(k/4) for k = 0...64, rounded, then `UInt64.max`.
    public static let standardUpperBounds: [UInt64] = {
        var bounds = (0...64).map { k in UInt64((16 * exp2(Double(k) / 4)).rounded()) }
        bounds.append(.max)
        return bounds
    }()

    /// Most buckets a reading from the wire may have.
    public static let maximumBuckets = 256

    /// Empty, with the standard bounds.
    public init() {
        upperBoundsMicros = Self.standardUpperBounds
        counts = Array(repeating: 0, count: Self.standardUpperBounds.count)
    }

    /// A reading as sent: one count per bound, the bounds strictly ascending and ending in
    /// `UInt64.max` (so that every duration has a bucket), at most ``maximumBuckets`` of them.
    /// Throws ``CodecError/invalidField(_:)`` naming what is wrong otherwise.
    public init(upperBoundsMicros: [UInt64], counts: [UInt64]) throws(CodecError) {
        if upperBoundsMicros.isEmpty && counts.isEmpty {
            // An empty message: nothing counted yet.
            self.upperBoundsMicros = Self.standardUpperBounds
            self.counts = Array(repeating: 0, count: Self.standardUpperBounds.count)
            return
        }
        guard upperBoundsMicros.count == counts.count else {
            throw .invalidField("LatencyBuckets has \(upperBoundsMicros.count) bounds and \(counts.count) counts")
        }
        guard upperBoundsMicros.count <= Self.maximumBuckets else {
            throw .invalidField("LatencyBuckets has \(upperBoundsMicros.count) buckets (at most \(Self.maximumBuckets))")
        }
        guard zip(upperBoundsMicros, upperBoundsMicros.dropFirst()).allSatisfy({ $0 < $1 }), upperBoundsMicros.last == .max else {
            throw .invalidField("LatencyBuckets bounds do not ascend strictly to 2^64 - 1")
        }
        self.upperBoundsMicros = upperBoundsMicros
        self.counts = counts
    }

    /// Durations counted.
    public var total: UInt64 { counts.reduce(0, &+) }

    /// Counts one duration of `micros` microseconds.
    public mutating func record(micros: UInt64) {
        var low = 0
        var high = upperBoundsMicros.count - 1
        while low < high {
            let middle = (low + high) / 2
            if upperBoundsMicros[middle] >= micros { high = middle } else { low = middle + 1 }
        }
        counts[low] &+= 1
    }

    /// What was counted after `earlier`, a previous reading of the same node; nil when the two
    /// cannot be told apart that way: different bounds, or a count that went down (the node
    /// restarted in between).
    public func since(_ earlier: LatencyBuckets) -> LatencyBuckets? {
        guard earlier.upperBoundsMicros == upperBoundsMicros,
            zip(counts, earlier.counts).allSatisfy({ $0 >= $1 })
        else { return nil }
        var difference = self
        difference.counts = zip(counts, earlier.counts).map { $0 - $1 }
        return difference
    }

    /// The upper bound of the bucket holding the `percentile`th duration (0 < percentile ≤ 100):
    /// no duration counted below it is longer. `UInt64.max` when that is the open last bucket;
    /// nil when nothing was counted.
    public func percentile(_ percentile: Double) -> UInt64? {
        let total = total
        guard total > 0 else { return nil }
        let rank = max(1, UInt64((percentile / 100 * Double(total)).rounded(.up)))
        var seen: UInt64 = 0
        for (bound, count) in zip(upperBoundsMicros, counts) {
            seen += count
            if seen >= rank { return bound }
        }
        return upperBoundsMicros.last
    }

    /// The percentiles people read, and the longest duration's bucket, nil when nothing was
    /// counted.
    public var summary: Summary? {
        guard let p50 = percentile(50), let p90 = percentile(90), let p99 = percentile(99), let p999 = percentile(99.9),
            let longest = percentile(100)
        else { return nil }
        return Summary(count: total, p50Micros: p50, p90Micros: p90, p99Micros: p99, p999Micros: p999, maxMicros: longest)
    }

    /// Percentiles of a ``LatencyBuckets``, each the upper bound of the bucket that holds it.
    public struct Summary: Codable, Equatable, Sendable, CustomStringConvertible {
        public let count: UInt64
        public let p50Micros: UInt64
        public let p90Micros: UInt64
        public let p99Micros: UInt64
        public let p999Micros: UInt64
        /// The bound of the bucket holding the longest duration counted: a few stalls too rare
        /// for p99.9 (a disk that took 30 ms over a few commits) show here.
        public let maxMicros: UInt64

        public init(count: UInt64, p50Micros: UInt64, p90Micros: UInt64, p99Micros: UInt64, p999Micros: UInt64, maxMicros: UInt64) {
            self.count = count
            self.p50Micros = p50Micros
            self.p90Micros = p90Micros
            self.p99Micros = p99Micros
            self.p999Micros = p999Micros
            self.maxMicros = maxMicros
        }

        /// `p50 <=431us p90 <=609us p99 <=1.45ms p99.9 <=4.1ms max >1s`: `>1s` for the open last
        /// bucket.
        public var description: String {
            [("p50", p50Micros), ("p90", p90Micros), ("p99", p99Micros), ("p99.9", p999Micros), ("max", maxMicros)]
                .map { "\($0.0) " + ($0.1 == .max ? ">1s" : "<=" + Self.text(micros: $0.1)) }.joined(separator: " ")
        }

        /// `431us`, `1.41ms`, `2.1s`.
        static func text(micros: UInt64) -> String {
            if micros < 1_000 { return "\(micros)us" }
            let (unit, scale): (String, UInt64) = micros < 1_000_000 ? ("ms", 1_000) : ("s", 1_000_000)
            let hundredths = (micros * 100 + scale / 2) / scale
            let fraction = hundredths % 100
            let decimals = fraction == 0 ? "" : fraction % 10 == 0 ? ".\(fraction / 10)" : fraction < 10 ? ".0\(fraction)" : ".\(fraction)"
            return "\(hundredths / 100)\(decimals)\(unit)"
        }
    }
}
