#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CLinuxFile

/// The scheduling-priority calls the project makes, in one place.
public enum Scheduling {
    /// Puts the calling thread in `SCHED_IDLE` (Linux): it runs only on CPU time nothing else
    /// wants, so background work (taking a snapshot) never takes it from requests. False where
    /// the platform has no such class or the call failed; the thread then keeps its priority.
    @discardableResult
    public static func runThisThreadWhenIdle() -> Bool {
        #if os(Linux)
        return registry_run_when_idle() == 0
        #else
        return false
        #endif
    }
}
