import Platform
import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

@Suite struct LatencyBucketsTests {
    @Test func theStandardBoundsAreFourPerDoublingFrom16MicrosecondsToOneSecond() {
        let bounds = LatencyBuckets.standardUpperBounds
        #expect(bounds.count == 66)
        #expect(bounds.prefix(5) == [16, 19, 23, 27, 32])
        #expect(bounds[8] == 64 && bounds[40] == 16 * 1_024 && bounds[64] == 1_048_576)
        #expect(bounds.last == .max)
        #expect(zip(bounds, bounds.dropFirst()).allSatisfy { $0 < $1 })
    }

    @Test func aDurationGoesInTheFirstBucketWhoseBoundHoldsIt() {
        var buckets = LatencyBuckets()
        for micros: UInt64 in [0, 16, 17, 19, 20, 1_048_576, 1_048_577, .max] { buckets.record(micros: micros) }
        let filled = buckets.counts.enumerated().filter { $0.element > 0 }.map { [$0.offset, Int($0.element)] }
        #expect(filled == [[0, 2], [1, 2], [2, 1], [64, 1], [65, 2]])
        #expect(buckets.total == 8)
    }

    /// Against exact percentiles of seeded random durations: a bucket's bound is never below
    /// the true value and at most one bucket (19%) above it.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func percentilesAreBucketBoundsJustAboveTheExactValues(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        var buckets = LatencyBuckets()
        var exact = [UInt64]()
        for _ in 0..<10_000 {
            // Log-uniform from 16 us to about 0.5 s, like commit times.
            let micros = UInt64(16 * exp2(Double.random(in: 0..<15, using: &random)))
            exact.append(micros)
            buckets.record(micros: micros)
        }
        exact.sort()
        for percentile in [50.0, 90, 99, 99.9, 100] {
            let truth = exact[Int((percentile / 100 * Double(exact.count)).rounded(.up)) - 1]
            let reported = try #require(buckets.percentile(percentile))
            #expect(reported >= truth, "p\(percentile)")
            #expect(Double(reported) <= Double(truth) * 1.19 + 1, "p\(percentile): \(reported) for \(truth)")
        }
    }

    @Test func nothingCountedHasNoPercentiles() {
        #expect(LatencyBuckets().percentile(50) == nil)
        #expect(LatencyBuckets().summary == nil)
    }

    @Test func twoReadingsSubtractIntoTheWindowBetweenThem() throws {
        var reading = LatencyBuckets()
        for _ in 0..<100 { reading.record(micros: 5_000) }
        let earlier = reading
        for _ in 0..<10 { reading.record(micros: 100) }
        let window = try #require(reading.since(earlier))
        #expect(window.total == 10 && window.percentile(100) == 108)
        // A node that restarted in between counts less than before: no window.
        #expect(earlier.since(reading) == nil)
        let other = try LatencyBuckets(upperBoundsMicros: [10, .max], counts: [0, 0])
        #expect(reading.since(other) == nil)
    }

    @Test func readingsFromTheWireAreChecked() throws {
        #expect(try LatencyBuckets(upperBoundsMicros: [], counts: []) == LatencyBuckets())
        #expect(try LatencyBuckets(upperBoundsMicros: [10, .max], counts: [3, 1]).percentile(75) == 10)
        let refused: [([UInt64], [UInt64])] = [
            ([10, .max], [1]),  // a count missing
            ([20, 10, .max], [0, 0, 0]),  // not ascending
            ([10, 10, .max], [0, 0, 0]),  // a bound twice
            ([10, 20], [0, 0]),  // no bucket for longer durations
            (Array(1...300) + [.max], Array(repeating: 0, count: 301)),  // too many
        ]
        for (bounds, counts) in refused {
            #expect(throws: CodecError.self) { try LatencyBuckets(upperBoundsMicros: bounds, counts: counts) }
        }
    }

    /// A Stats frame whose buckets do not ascend, written byte by byte as another
    /// implementation might send it, is a typed decoding error.
    @Test func aStatsFrameWithBadBucketsIsRefused() {
        let buckets: [UInt8] = [0x0A, 0x02, 0x05, 0x03, 0x12, 0x02, 0x01, 0x01]  // bounds [5, 3], counts [1, 1]
        let stats: [UInt8] = [0x7A, UInt8(buckets.count)] + buckets  // Stats.commit_latency = 15
        let frame: [UInt8] = [0x08, 0x01, 0x32, UInt8(stats.count)] + stats  // request_id = 1, stats = 6
        #expect(throws: CodecError.invalidField("LatencyBuckets bounds do not ascend strictly to 2^64 - 1")) {
            try ServerFrame(decoding: ByteBuffer(bytes: frame))
        }
    }

    @Test func summariesReadAsBoundsPeopleCanScan() throws {
        var buckets = LatencyBuckets()
        for micros: UInt64 in [300, 400, 1_300, 2_100_000] { buckets.record(micros: micros) }
        let summary = try #require(buckets.summary)
        #expect(summary.count == 4)
        #expect(summary.description == "p50 <=431us p90 >1s p99 >1s p99.9 >1s max >1s")
        // A single slow commit among thousands is below p99.9 and shows only as the max.
        var rare = LatencyBuckets()
        for _ in 0..<5_000 { rare.record(micros: 150) }
        rare.record(micros: 30_000)
        let rareSummary = try #require(rare.summary)
        #expect(rareSummary.p999Micros == 152 && rareSummary.maxMicros == 32_768)
        #expect(rareSummary.description == "p50 <=152us p90 <=152us p99 <=152us p99.9 <=152us max <=32.77ms")
        #expect(LatencyBuckets.Summary.text(micros: 1_414) == "1.41ms")
        #expect(LatencyBuckets.Summary.text(micros: 2_000) == "2ms")
        #expect(LatencyBuckets.Summary.text(micros: 1_030) == "1.03ms")
        #expect(LatencyBuckets.Summary.text(micros: 2_100_000) == "2.1s")
    }
}
