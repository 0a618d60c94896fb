import Foundation
import Testing
@testable import LoadGeneration

/// ``PerSecondLatency``: what the seconds' p99s say together.
@Suite struct PerSecondLatencyTests {
    func seconds(_ p99s: [UInt64]) -> [PerSecondLatency.Second] {
        p99s.enumerated().map { PerSecondLatency.Second(elapsedSeconds: Double($0.offset + 1), acknowledged: 100, p99: $0.element) }
    }

    @Test func oneStalledSecondShowsAsTheWorstAndLeavesTheMedianAlone() {
        let run = PerSecondLatency(seconds: seconds([1_500_000, 1_200_000, 40_000_000, 1_400_000, 1_300_000]))
        #expect(run.medianP99 == 1_400_000)
        #expect(run.worstP99 == 40_000_000)
        #expect(run.secondsOver(2_000_000) == 1)
        #expect(run.secondsOver(1_000_000) == 5)
        #expect(run.secondsOver(40_000_000) == 0, "over, not at")
    }

    @Test func anEvenCountTakesTheHigherMiddleSecond() {
        #expect(PerSecondLatency(seconds: seconds([4, 1, 3, 2])).medianP99 == 3)
    }

    @Test func noSecondsHaveNoMedian() {
        let run = PerSecondLatency(seconds: [])
        #expect(run.medianP99 == nil && run.worstP99 == nil && run.secondsOver(0) == 0)
    }

    @Test func theReportKeysAreSnakeCaseNanoseconds() throws {
        let data = try JSONEncoder().encode(PerSecondLatency(seconds: seconds([2_000_000])))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(json["median_p99_ns"] as? Int == 2_000_000 && json["worst_p99_ns"] as? Int == 2_000_000)
        let second = try #require((json["seconds"] as? [[String: Any]])?.first)
        #expect(second["p99_ns"] as? Int == 2_000_000 && second["elapsed_s"] as? Double == 1 && second["acknowledged"] as? Int == 100)
        #expect(try JSONDecoder().decode(PerSecondLatency.self, from: data) == PerSecondLatency(seconds: seconds([2_000_000])))
    }
}
