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
        #expect(policy.shouldStart(durableOperations: 150, nowNanos: 64 * second) == true, "so the next commit tries again")
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
