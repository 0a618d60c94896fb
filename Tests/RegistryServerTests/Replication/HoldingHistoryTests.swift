import RegistryCore
import Testing
@testable import RegistryServer

/// Which operations of a log this node has held for a span of time.
@Suite struct HoldingHistoryTests {
    @Test func nothingCountsUntilTheFirstSampleIsASpanOld() {
        var history = HoldingHistory(span: 500, spacing: 50)
        #expect(history.heldForSpan(holding: 40, nowMillis: 1_000) == 0)
        #expect(history.heldForSpan(holding: 60, nowMillis: 1_499) == 0)
        #expect(history.heldForSpan(holding: 60, nowMillis: 1_500) == 40)
        #expect(history.heldForSpan(holding: 90, nowMillis: 1_990) == 40, "60 was first seen at 1,499 ms")
        #expect(history.heldForSpan(holding: 90, nowMillis: 1_999) == 60)
        #expect(history.heldForSpan(holding: 90, nowMillis: 9_000) == 90)
    }

    /// Growth seen less than `spacing` after the last sample counts from the next sample: later
    /// than it could, never sooner.
    @Test func growthBetweenSamplesCountsFromTheLaterSample() {
        var history = HoldingHistory(span: 500, spacing: 50)
        _ = history.heldForSpan(holding: 10, nowMillis: 1_000)
        _ = history.heldForSpan(holding: 20, nowMillis: 1_020)  // not sampled
        _ = history.heldForSpan(holding: 20, nowMillis: 1_060)  // sampled, as first seen now
        #expect(history.heldForSpan(holding: 20, nowMillis: 1_520) == 10)
        #expect(history.heldForSpan(holding: 20, nowMillis: 1_560) == 20)
    }

    @Test func aClockThatWentBackStartsTheHistoryAgain() {
        var history = HoldingHistory(span: 500, spacing: 50)
        _ = history.heldForSpan(holding: 10, nowMillis: 5_000)
        #expect(history.heldForSpan(holding: 10, nowMillis: 6_000) == 10)
        #expect(history.heldForSpan(holding: 30, nowMillis: 2_000) == 0)
        #expect(history.heldForSpan(holding: 30, nowMillis: 2_500) == 30)
    }

    @Test func aSpanOfZeroCountsWhatIsHeld() {
        var history = HoldingHistory(span: 0, spacing: 1)
        #expect(history.heldForSpan(holding: 7, nowMillis: 1_000) == 7)
    }

    /// Seeded calls at random intervals, with random growth, against an oracle that keeps every
    /// call: the answer never counts an operation first seen less than `span` ago, and counts
    /// every one seen at a call `spacing` or more before the last call `span` or more ago.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func neverCountsWhatWasHeldLessThanTheSpanAndLagsItBySpacingAtMost(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let span: UInt64 = 500
        let spacing: UInt64 = 50
        var history = HoldingHistory(span: span, spacing: spacing)
        var calls = [(millis: UInt64, sequence: UInt64)]()
        var now: UInt64 = 1_000
        var sequence: UInt64 = 0
        for _ in 0..<2_000 {
            // Mostly calls close together; now and then a pause longer than the span.
            now += Int.random(in: 0..<50, using: &random) == 0 ? UInt64.random(in: 0...1_000, using: &random) : UInt64.random(in: 0...40, using: &random)
            if Bool.random(using: &random) { sequence += UInt64.random(in: 1...100, using: &random) }
            calls.append((now, sequence))
            let answer = history.heldForSpan(holding: sequence, nowMillis: now)
            // The most held at a call `span` ago or earlier: nothing beyond it may count.
            let heldASpanAgo = calls.last { $0.millis + span <= now }?.sequence ?? 0
            #expect(answer <= heldASpanAgo, "at \(now) ms")
            // A sequence is sampled, at the latest, by the first call `spacing` or more after
            // the one it was seen at: so by the last call `span` ago or earlier, for every call
            // `spacing` before that one.
            let lastASpanAgo = calls.last { $0.millis + span <= now }?.millis ?? 0
            let surelySampled = calls.last { $0.millis + spacing <= lastASpanAgo }?.sequence ?? 0
            #expect(answer >= surelySampled, "at \(now) ms")
        }
    }
}
