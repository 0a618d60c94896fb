import RegistryTestSupport
import Testing

/// The `.offThePool` trait moves a test's own work, and its child tasks', to a thread of its own:
/// on a test, and on every test of a suite it marks (synchronous, parameterized, or async).
@Suite(.timeLimit(.minutes(5))) struct OffThePoolTraitTests {
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

    /// The marked tests are synchronous, and some are marked through their suite.
    @Suite(.offThePool) struct MarkedSuite {
        @Test func aSynchronousTest() {
            #expect(ThreadTaskExecutor.isCurrent)
        }

        @Test(arguments: [1, 2, 3]) func eachCaseOfAParameterizedTest(_ argument: Int) {
            #expect(ThreadTaskExecutor.isCurrent, "case \(argument)")
        }
    }
}
