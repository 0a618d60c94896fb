#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
/// The clocks the project reads, in one place: the wall clock for what is stamped and compared
/// across nodes, and the monotonic clock for durations and deadlines inside one process.
public enum SystemClock {
    /// Milliseconds since the Unix epoch (`CLOCK_REALTIME`): it can jump both ways when the
    /// machine's clock is set, which the hybrid logical clock allows for.
    @Sendable public static func wallMillis() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }

    /// Nanoseconds of `CLOCK_MONOTONIC`: never goes back, meaningless across processes. Only
    /// differences between two readings mean anything.
    public static func monotonicNanos() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }

    /// Milliseconds of `CLOCK_MONOTONIC`, for deadlines inside one process: a timer set for a
    /// duration finds its deadline passed when it fires, whatever the wall clock did meanwhile.
    @Sendable public static func monotonicMillis() -> UInt64 {
        monotonicNanos() / 1_000_000
    }

    /// Nanoseconds of CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), for pacing
    /// background work by what it costs rather than by wall time.
    public static func threadCPUNanos() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
    }
}
