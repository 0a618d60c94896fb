import RegistryCore
import Testing
@testable import RegistryServer

/// ``ErasureSchedule``: when erasure snapshots are due, and which forgets one covers.
@Suite struct ErasureScheduleTests {
    let second: UInt64 = 1_000_000_000
    let a = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let b = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)

    @Test func aForgetIsDueHalfTheDeadlineLaterOnceDurableAndASnapshotCoveringItClearsIt() {
        var schedule = ErasureSchedule(withinSeconds: 100)
        schedule.observe(erasures: 0, held: [a: 5], nowNanos: 0)
        #expect(schedule.groups.isEmpty && !schedule.isDue(nowNanos: 1_000 * second, durable: [a: 5]))
        schedule.observe(erasures: 1, held: [a: 7, b: 3], nowNanos: 10 * second)
        #expect(!schedule.isDue(nowNanos: 59 * second, durable: [a: 7, b: 3]) && schedule.isDue(nowNanos: 60 * second, durable: [a: 7, b: 3]))
        // Not durable yet (a slow disk): a snapshot would not hold the forget, so none is due.
        #expect(!schedule.isDue(nowNanos: 60 * second, durable: [a: 7, b: 2]))
        // A snapshot of less than the node held when it saw the forget leaves it due.
        schedule.erasureSnapshotTaken(covering: [a: 7])
        #expect(schedule.isDue(nowNanos: 60 * second, durable: [a: 7, b: 3]))
        schedule.erasureSnapshotTaken(covering: [a: 8, b: 3])
        #expect(schedule.groups.isEmpty && !schedule.isDue(nowNanos: 1_000 * second, durable: [a: 8, b: 3]))
        // The same count again is no new forget.
        schedule.observe(erasures: 1, held: [a: 9], nowNanos: 70 * second)
        #expect(schedule.groups.isEmpty)
    }

    @Test func forgetsWithinAQuarterOfTheDeadlineShareOneSnapshotAndLaterOnesWaitForTheirOwn() {
        var schedule = ErasureSchedule(withinSeconds: 100)
        schedule.observe(erasures: 1, held: [a: 1], nowNanos: 0)
        schedule.observe(erasures: 3, held: [a: 4], nowNanos: 20 * second)
        schedule.observe(erasures: 4, held: [a: 6], nowNanos: 30 * second)
        #expect(schedule.groups == [.init(first: 0, held: [a: 4]), .init(first: 30 * second, held: [a: 6])])
        #expect(schedule.isDue(nowNanos: 50 * second, durable: [a: 4]))
        schedule.erasureSnapshotTaken(covering: [a: 4])
        #expect(schedule.groups == [.init(first: 30 * second, held: [a: 6])])
        #expect(!schedule.isDue(nowNanos: 79 * second, durable: [a: 6]) && schedule.isDue(nowNanos: 80 * second, durable: [a: 6]))
        schedule.erasureSnapshotTaken(covering: [a: 6])
        #expect(schedule.groups.isEmpty)
    }

    @Test func aDeadlineOf0TurnsItOffAndTheCheckIntervalIsBounded() {
        var off = ErasureSchedule(withinSeconds: 0)
        off.observe(erasures: 9, held: [a: 1], nowNanos: 0)
        #expect(off.groups.isEmpty && !off.isDue(nowNanos: .max / 2, durable: [a: 1]))
        #expect(ErasureSchedule(withinSeconds: 86_400).checkIntervalNanos == 60 * second)
        #expect(ErasureSchedule(withinSeconds: 1).checkIntervalNanos == second / 10)
        #expect(ErasureSchedule(withinSeconds: 100).checkIntervalNanos == 5 * second)
    }
}
