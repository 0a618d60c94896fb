#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
// `sysconf`'s names, which Glibc's module does not carry (`unistd.h` through the shim).
import CLinuxFile

/// The memory this process may use, as the kernel reports it.
public enum MachineMemory {
    /// The least of the machine's physical memory and the memory limit of the process's control
    /// group (cgroup v2's `memory.max`, else v1's `memory.limit_in_bytes`), when it has one: in a
    /// container, the machine's figure is the host's.
    public static var usableBytes: Int {
        let limits = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"].compactMap { path in
            KernelFile.text(at: path, upTo: 64).flatMap(cgroupLimit)
        }
        return ([physicalBytes] + limits).min()!
    }

    /// A control group's memory limit file's text, as the kernel writes it; nil for `max` (no
    /// limit) or anything that is not a number of bytes.
    public static func cgroupLimit(_ text: String) -> Int? {
        Int(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// Bytes of physical memory (`sysconf`'s pages times the page size); `Int.max` when the system
    /// does not say, so that a bound made from it bounds nothing rather than everything.
    public static var physicalBytes: Int {
        let pages = sysconf(Int32(_SC_PHYS_PAGES))
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard pages > 0, pageSize > 0 else { return .max }
        let (bytes, overflow) = pages.multipliedReportingOverflow(by: pageSize)
        return overflow ? .max : bytes
    }
}
