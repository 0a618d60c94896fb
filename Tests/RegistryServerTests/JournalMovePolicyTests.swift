import RegistryCore
import Testing
@testable import RegistryServer

@Suite struct JournalMovePolicyTests {
    static let millis: UInt64 = 1_000_000

    /// Readings every `interval` ms from `start` ms for `count` readings, at `rate` operations a
    /// second, from `operations`.
    func feed(_ policy: inout JournalMovePolicy, from start: UInt64, every interval: UInt64, count: Int, rate: UInt64, operations: inout UInt64) {
        for index in 0..<UInt64(count) {
            policy.observe(nanos: (start + index * interval) * Self.millis, operations: operations)
            operations += rate * interval / 1_000
        }
    }

    @Test func aShortSpanIsNotJudgedYet() {
        var policy = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        var operations: UInt64 = 0
        feed(&policy, from: 0, every: 100, count: 3, rate: 0, operations: &operations)
        // 200 ms of readings: too short to call the node quiet.
        #expect(policy.operationsPerSecond == nil && !policy.isQuiet)
        policy.observe(nanos: 300 * Self.millis, operations: operations)
        #expect(policy.operationsPerSecond == 0 && policy.isQuiet)
    }

    @Test func aBusyNodeIsNotQuietAndAQuietOneIs() {
        var busy = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        var operations: UInt64 = 0
        feed(&busy, from: 0, every: 100, count: 20, rate: 390_000, operations: &operations)
        #expect(!busy.isQuiet)
        #expect(abs((busy.operationsPerSecond ?? 0) - 390_000) < 1)

        var light = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        operations = 0
        feed(&light, from: 0, every: 100, count: 20, rate: 1_000, operations: &operations)
        #expect(light.isQuiet)
        // Exactly at the threshold still counts as quiet; just above it does not.
        var atThreshold = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        operations = 0
        feed(&atThreshold, from: 0, every: 100, count: 20, rate: 20_000, operations: &operations)
        #expect(atThreshold.isQuiet)
        var above = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        operations = 0
        feed(&above, from: 0, every: 100, count: 20, rate: 20_100, operations: &operations)
        #expect(!above.isQuiet)
    }

    /// Load that starts stops moving within a reading or two; after load stops, moving waits
    /// until the window no longer holds it.
    @Test func loadStopsMovingAtOnceAndQuietResumesItAfterTheWindow() {
        var policy = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        var operations: UInt64 = 0
        feed(&policy, from: 0, every: 100, count: 20, rate: 0, operations: &operations)
        #expect(policy.isQuiet)
        // 100 ms at 390,000/s: 39,000 operations in the last second.
        feed(&policy, from: 2_000, every: 100, count: 2, rate: 390_000, operations: &operations)
        #expect(!policy.isQuiet)
        feed(&policy, from: 2_200, every: 100, count: 30, rate: 390_000, operations: &operations)
        #expect(!policy.isQuiet)
        // Quiet again: not until the busy readings have left the window.
        var quietFor = 0
        for index in 0..<30 {
            policy.observe(nanos: (5_200 + UInt64(index) * 100) * Self.millis, operations: operations)
            if policy.isQuiet {
                quietFor = index
                break
            }
        }
        #expect(quietFor >= 9 && quietFor <= 10, "quiet after \(quietFor) readings")
    }

    @Test func zeroNeverMoves() {
        var policy = JournalMovePolicy(quietOperationsPerSecond: 0)
        var operations: UInt64 = 0
        feed(&policy, from: 0, every: 100, count: 30, rate: 0, operations: &operations)
        #expect(policy.operationsPerSecond == 0 && !policy.isQuiet)
    }

    /// Whatever the reading intervals, the readings kept span about the window (never less once
    /// there are enough), and the rate is their operations over their span.
    @Test func theWindowHoldsAboutOneSecondOfReadings() {
        var generator = SplitMix64(seed: 23)
        var policy = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        var nanos: UInt64 = 0
        var operations: UInt64 = 0
        for _ in 0..<2_000 {
            nanos += 1 + generator.next() % (300 * Self.millis)
            operations += generator.next() % 10_000
            policy.observe(nanos: nanos, operations: operations)
            let first = policy.samples[0], last = policy.samples[policy.samples.count - 1]
            let span = last.nanos - first.nanos
            if policy.samples.count > 2 {
                // The second reading is inside the window, so the span is under a window plus one interval.
                #expect(last.nanos - policy.samples[1].nanos < JournalMovePolicy.windowNanos)
            }
            if nanos >= JournalMovePolicy.windowNanos + 300 * Self.millis {
                #expect(span >= JournalMovePolicy.windowNanos)
            }
            let expected = Double(last.operations - first.operations) * 1e9 / Double(span)
            if span >= JournalMovePolicy.minimumSpanNanos { #expect(policy.operationsPerSecond == expected) }
        }
    }

    /// Three times the step, and at least 15 ms while the node is idle or 100 ms while it serves.
    @Test func aRestIsThreeTimesTheStepAndLongerWhileTheNodeServes() {
        var operations: UInt64 = 0
        var idle = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        feed(&idle, from: 0, every: 100, count: 20, rate: 50, operations: &operations)
        #expect(idle.pause(afterStepOf: 40 * Self.millis) == 120 * Self.millis)
        #expect(idle.pause(afterStepOf: 1_000) == JournalMovePolicy.idlePauseNanos)
        operations = 0
        var serving = JournalMovePolicy(quietOperationsPerSecond: 20_000)
        feed(&serving, from: 0, every: 100, count: 20, rate: 5_000, operations: &operations)
        #expect(serving.isQuiet)
        #expect(serving.pause(afterStepOf: 1_000) == JournalMovePolicy.servingPauseNanos)
        #expect(serving.pause(afterStepOf: 50 * Self.millis) == 150 * Self.millis)
    }
}
