import Testing
@testable import RegistryCore

@Suite struct HybridLogicalClockTests {
    @Test func followsWallClockAndCountsWithinAMillisecond() {
        var clock = HybridLogicalClock()
        #expect(clock.tick(wallMillis: 100) == HLCTimestamp(millis: 100, counter: 0))
        #expect(clock.tick(wallMillis: 100) == HLCTimestamp(millis: 100, counter: 1))
        #expect(clock.tick(wallMillis: 101) == HLCTimestamp(millis: 101, counter: 0))
    }

    @Test func neverGoesBackwardsWhenTheWallClockDoes() {
        var clock = HybridLogicalClock(last: HLCTimestamp(millis: 500, counter: 3))
        let next = clock.tick(wallMillis: 10)
        #expect(next == HLCTimestamp(millis: 500, counter: 4))
    }

    @Test func counterOverflowCarriesIntoMilliseconds() {
        var clock = HybridLogicalClock(last: HLCTimestamp(millis: 7, counter: .max))
        #expect(clock.tick(wallMillis: 7) == HLCTimestamp(millis: 8, counter: 0))
    }

    @Test func observedTimestampsAdvanceTheClock() throws {
        var clock = HybridLogicalClock(last: HLCTimestamp(millis: 100, counter: 0), maxForwardDriftMillis: 1_000)
        let merged = try clock.observe(HLCTimestamp(millis: 600, counter: 9), wallMillis: 200)
        #expect(merged == HLCTimestamp(millis: 600, counter: 10))
        #expect(clock.tick(wallMillis: 200) == HLCTimestamp(millis: 600, counter: 11))
        let older = try clock.observe(HLCTimestamp(millis: 50, counter: 0), wallMillis: 700)
        #expect(older == HLCTimestamp(millis: 700, counter: 0))
    }

    @Test func refusesTimestampsTooFarAhead() {
        var clock = HybridLogicalClock(last: HLCTimestamp(millis: 100, counter: 0), maxForwardDriftMillis: 1_000)
        #expect(throws: HybridLogicalClock.Refusal.self) {
            try clock.observe(HLCTimestamp(millis: 5_000, counter: 0), wallMillis: 3_999)
        }
        #expect(clock.last == HLCTimestamp(millis: 100, counter: 0))
        #expect((try? clock.observe(HLCTimestamp(millis: 5_000, counter: 0), wallMillis: 4_000)) != nil)
    }

    @Test func seededRandomTicksAreStrictlyIncreasing() {
        var generator = SplitMix64(seed: 42)
        var clock = HybridLogicalClock()
        var wall: UInt64 = 1_000_000
        var previous = HLCTimestamp.zero
        for _ in 0..<10_000 {
            // The wall clock jitters, including backwards.
            wall = wall &+ (generator.next() % 5) &- 2
            let next = clock.tick(wallMillis: wall)
            #expect(next > previous)
            previous = next
        }
    }
}
