import Testing
@testable import RegistryServer

/// When a node takes its next snapshot.
@Suite struct SnapshotPolicyTests {
    let second: UInt64 = 1_000_000_000

    @Test func byCountByTimeAndNeverTwiceAtOnce() {
        var policy = SnapshotPolicy(everyOperations: 100, everySeconds: 60, coveredOperations: 0, nowNanos: 0)
        #expect(policy.shouldStart(durableOperations: 99, nowNanos: second) == false)
        #expect(policy.shouldStart(durableOperations: 100, nowNanos: second) == true)
        #expect(policy.shouldStart(durableOperations: 500, nowNanos: 2 * second) == false, "one at a time")
        #expect(policy.startByRequest() == false)
        policy.finished(covering: 100, nowNanos: 3 * second)
        #expect(policy.coveredOperations == 100)
        #expect(policy.shouldStart(durableOperations: 150, nowNanos: 30 * second) == false)
        #expect(policy.shouldStart(durableOperations: 150, nowNanos: 63 * second) == true, "a minute passed with something new")
        policy.finished(covering: nil, nowNanos: 64 * second)
        #expect(policy.coveredOperations == 100, "a failed snapshot covers nothing")
        #expect(policy.shouldStart(durableOperations: 150, nowNanos: 64 * second) == false, "not at the next commit")
        #expect(policy.shouldStart(durableOperations: 150, nowNanos: 74 * second) == true, "10 s later")
    }

    /// Failures in a row wait longer and longer before the next try, up to 10 minutes; one that
    /// works, or a snapshot taken otherwise, ends the wait.
    @Test func failuresInARowWaitLongerAndASuccessEndsTheWait() {
        var policy = SnapshotPolicy(everyOperations: 1, everySeconds: 0, coveredOperations: 0, nowNanos: 0)
        var now: UInt64 = 0
        #expect(policy.shouldStart(durableOperations: 10, nowNanos: now) == true)
        policy.finished(covering: nil, nowNanos: now)
        var waits = [UInt64]()
        for _ in 0..<8 {
            var next = now
            while !policy.shouldStart(durableOperations: 10, nowNanos: next) { next += second }
            waits.append((next - now) / second)
            policy.finished(covering: nil, nowNanos: next)
            now = next
        }
        #expect(waits == [10, 20, 40, 80, 160, 320, 600, 600])
        #expect(policy.startByRequest() == true, "by hand, at once")
        policy.finished(covering: 5, nowNanos: now)
        #expect(policy.shouldStart(durableOperations: 10, nowNanos: now) == true, "a snapshot that worked ends the wait")
        policy.finished(covering: nil, nowNanos: now)
        policy.covers(10, nowNanos: now)
        #expect(policy.shouldStart(durableOperations: 20, nowNanos: now) == true, "so does one installed or taken in the foreground")
    }

    @Test func nothingNewNeverSnapshotsAndZeroTurnsARuleOff() {
        // A big last snapshot: the next waits until as many operations again are new.
        var big = SnapshotPolicy(everyOperations: 100, everySeconds: 0, coveredOperations: 1_000, nowNanos: 0)
        #expect(big.shouldStart(durableOperations: 1_999, nowNanos: second) == false)
        #expect(big.shouldStart(durableOperations: 2_000, nowNanos: second) == true)
        var idle = SnapshotPolicy(everyOperations: 1, everySeconds: 1, coveredOperations: 50, nowNanos: 0)
        #expect(idle.shouldStart(durableOperations: 50, nowNanos: 1_000 * second) == false)
        var never = SnapshotPolicy(everyOperations: 0, everySeconds: 0, coveredOperations: 0, nowNanos: 0)
        #expect(never.shouldStart(durableOperations: 1_000_000, nowNanos: 1_000_000 * second) == false)
        #expect(never.startByRequest() == true, "a request is always taken when none runs")
    }
}
