#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The process's limit of open file descriptors (`RLIMIT_NOFILE`), which every connection
/// counts against.
public enum OpenFileLimit {
    /// Raises the soft limit to the hard one, as a server that holds many connections should
    /// (the soft limit is often 1,024 while the hard one is far higher), and returns the soft
    /// limit then in force; nil when it cannot be read. A soft limit that cannot be raised
    /// stays as it was.
    public static func raiseToHard() -> UInt64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return UInt64(raised.rlim_max) }
        }
        return UInt64(limit.rlim_cur)
    }
}
