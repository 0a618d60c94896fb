import Testing
@testable import RegistryServer

/// ``CommitPacing``: which commit passes wait for more operations.
@Suite struct CommitPacingTests {
    let pacing = CommitPacing(delayMicros: 200, worthOperations: 200)

    @Test func aFirstPassAfterAnIdleWriterNeverWaits() {
        for pending in [0, 1, 100, 199, 200, 10_000] {
            #expect(pacing.delay(pendingOperations: pending, followsAnotherPass: false) == 0)
        }
    }

    @Test func aPassRightAfterAnotherWaitsOnlyWhenFewAreWaiting() {
        #expect(pacing.delay(pendingOperations: 0, followsAnotherPass: true) == 200)
        #expect(pacing.delay(pendingOperations: 100, followsAnotherPass: true) == 200)
        #expect(pacing.delay(pendingOperations: 199, followsAnotherPass: true) == 200)
        #expect(pacing.delay(pendingOperations: 200, followsAnotherPass: true) == 0)
        #expect(pacing.delay(pendingOperations: 5_000, followsAnotherPass: true) == 0)
    }

    @Test func aDelayOfZeroNeverWaits() {
        let never = CommitPacing(delayMicros: 0, worthOperations: 200)
        for pending in [0, 100, 1_000] {
            #expect(never.delay(pendingOperations: pending, followsAnotherPass: true) == 0)
        }
    }

    @Test func theDefaultIsWhatTheFlagsDescribe() {
        #expect(NodeConfiguration().commitPacing == CommitPacing(delayMicros: 300, worthOperations: 400))
    }
}
