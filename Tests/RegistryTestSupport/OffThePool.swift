import Foundation
import Testing

/// Runs each test case of the suite or test it marks on a thread of its own, away from Swift
/// concurrency's cooperative pool.
///
/// The pool has one thread per core (two on the CI machine), and Swift Testing runs the tests of a
/// process at once. A test case that computes for seconds without suspending (a simulation of a
/// cluster, a property test over thousands of seeds) holds a pool thread all that time; two of
/// them hold the whole pool, and every test that waits on the pool (a client's answer, an
/// in-process node's engine, a timer) waits with them (docs/architecture.md tells what a CI run
/// saw). Marked with this trait, such a test case's work runs on a thread of its own instead
/// (``ThreadTaskExecutor``), which the kernel schedules beside the pool's threads, so the tests
/// on the pool go on getting their share of the CPU.
///
/// For computing tests only: the pool also paces the tests that block their thread (the
/// integration tests wait for child processes so), and marking those let every integration suite
/// start its nodes at once (see docs/architecture.md).
///
/// What moves is the work of the test's own task, of its child tasks (they inherit the task's
/// executor preference) and of the default actors it calls; actors with executors of their own,
/// and unstructured tasks, stay where they were. The work takes turns on one thread, so a marked
/// test must never block its thread waiting for one of its own child tasks.
public struct OffThePoolTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Defensive: Swift Testing scopes this trait to test cases alone (a suite's own scope
        // would run no test code); each test case gets a thread.
        guard testCase != nil else { return try await function() }
        let executor = ThreadTaskExecutor()
        defer { executor.stop() }
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == OffThePoolTrait {
    /// Runs each test case on a thread of its own rather than on the cooperative pool: for tests
    /// that compute for long without suspending (see ``OffThePoolTrait``).
    public static var offThePool: Self { OffThePoolTrait() }
}

/// A task executor that runs every job on one thread of its own, started for it: its jobs never
/// wait for a pool's thread, and it takes none from a pool that other code of the process shares
/// (a dispatch queue's thread comes from libdispatch's).
///
/// Its jobs run one at a time, in the order they came: the test's own task and its child tasks
/// take turns, as on a pool of one thread.
public final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked Sendable: `jobs`, `stopping` and `taking` are read and written only while
    // `condition` is locked; the rest is immutable.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false
    private var taking = true
    private static let threadName = "off-the-pool"

    init() {
        let thread = Thread { [self] in self.run() }
        thread.name = Self.threadName
        thread.start()
    }

    /// Whether the calling code runs on the thread of a `ThreadTaskExecutor`.
    public static var isCurrent: Bool { Thread.current.threadDictionary[threadName] != nil }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if taking {
            jobs.append(job)
            condition.signal()
            condition.unlock()
            return
        }
        condition.unlock()
        // Its thread has ended: a job of the test's task that comes after its scope (none is
        // expected) still runs, on a thread of its own.
        let thread = Thread {
            Thread.current.threadDictionary[Self.threadName] = true
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
        thread.name = Self.threadName
        thread.start()
    }

    /// Ends the thread once it has run every job enqueued so far.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        Thread.current.threadDictionary[Self.threadName] = true
        while true {
            condition.lock()
            while jobs.isEmpty, !stopping { condition.wait() }
            if jobs.isEmpty {
                taking = false
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll()
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}
