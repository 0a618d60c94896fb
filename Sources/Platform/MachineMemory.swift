#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
// `sysconf`'s names, which Glibc's module does not carry (`unistd.h` through the shim).
import CLinuxFile

/// The machine's memory, as the kernel reports it.
public enum MachineMemory {
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
