import RegistryTestSupport
import Testing

/// The `.offThePool` trait moves a test's own work, and its child tasks', to a thread of its own.
@Suite struct OffThePoolTraitTests {
    @Test(.offThePool) func aMarkedTestRunsOnItsThreadAndSoDoItsChildTasks() async {
        #expect(ThreadTaskExecutor.isCurrent)
        async let child = ThreadTaskExecutor.isCurrent
        #expect(await child)
        await Task.yield()
        #expect(ThreadTaskExecutor.isCurrent, "after a suspension too")
    }

    @Test func anUnmarkedTestRunsOnThePool() {
        #expect(!ThreadTaskExecutor.isCurrent)
    }
}

