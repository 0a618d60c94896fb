import Testing
@testable import RegistryServer

/// ``ErasureSchedule``: when erasure snapshots are due, and which forgets one covers.
@Suite struct ErasureScheduleTests {
    let second: UInt64 = 1_000_000_000

    @Test func aForgetMakesASnapshotDueHalfTheDeadlineLaterAndOneSnapshotCoversIt() {
        var schedule = ErasureSchedule(withinSeconds: 100)
        schedule.observe(tombstones: 0, nowNanos: 0)
        #expect(schedule.groups.isEmpty && !schedule.isDue(nowNanos: 1_000 * second))
        schedule.observe(tombstones: 1, nowNanos: 10 * second)
        #expect(!schedule.isDue(nowNanos: 59 * second) && schedule.isDue(nowNanos: 60 * second))
        // A snapshot that started too soon after the forget (it may not be durable) leaves it due.
        schedule.erasureSnapshotTaken(startedNanos: 10 * second + second / 2)
        #expect(schedule.isDue(nowNanos: 60 * second))
        schedule.erasureSnapshotTaken(startedNanos: 60 * second)
        #expect(schedule.groups.isEmpty && !schedule.isDue(nowNanos: 1_000 * second))
        // The same count again is no new forget.
        schedule.observe(tombstones: 1, nowNanos: 70 * second)
        #expect(schedule.groups.isEmpty)
    }

    @Test func forgetsWithinAQuarterOfTheDeadlineShareOneSnapshotAndLaterOnesWaitForTheirOwn() {
        var schedule = ErasureSchedule(withinSeconds: 100)
        schedule.observe(tombstones: 1, nowNanos: 0)
        schedule.observe(tombstones: 3, nowNanos: 20 * second)
        schedule.observe(tombstones: 4, nowNanos: 30 * second)
        #expect(schedule.groups == [.init(first: 0, last: 20 * second), .init(first: 30 * second, last: 30 * second)])
        #expect(schedule.isDue(nowNanos: 50 * second))
        schedule.erasureSnapshotTaken(startedNanos: 50 * second)
        // The snapshot covered the second group too (it started long enough after it).
        #expect(schedule.groups.isEmpty)
        schedule.observe(tombstones: 5, nowNanos: 90 * second)
        schedule.erasureSnapshotTaken(startedNanos: 90 * second)
        #expect(schedule.groups.count == 1 && schedule.isDue(nowNanos: 140 * second) && !schedule.isDue(nowNanos: 139 * second))
    }

    @Test func aDeadlineOf0TurnsItOffAndTheCheckIntervalIsBounded() {
        var off = ErasureSchedule(withinSeconds: 0)
        off.observe(tombstones: 9, nowNanos: 0)
        #expect(off.groups.isEmpty && !off.isDue(nowNanos: .max / 2))
        #expect(ErasureSchedule(withinSeconds: 86_400).checkIntervalNanos == 60 * second)
        #expect(ErasureSchedule(withinSeconds: 1).checkIntervalNanos == second / 10)
        #expect(ErasureSchedule(withinSeconds: 100).checkIntervalNanos == 5 * second)
    }
}
