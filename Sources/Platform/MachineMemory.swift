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
            firstLine(of: path).flatMap(cgroupLimit)
        }
        return ([physicalBytes] + limits).min()!
    }

    /// A control group's memory limit file's text, as the kernel writes it; nil for `max` (no
    /// limit) or anything that is not a number of bytes.
    public static func cgroupLimit(_ text: String) -> Int? {
        Int(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
    }

    /// The start of a small file's text (64 bytes at most); nil when it cannot be read.
    private static func firstLine(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
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
