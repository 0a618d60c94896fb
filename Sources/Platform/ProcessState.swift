#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What Linux's `/proc/PID/stat` says of a process: whether it wants a CPU, and the CPU time it
/// has had. A parent reads it to tell a child that is slow because others take the CPUs from one
/// that is stuck (``ForkedWriter``'s callers).
public struct ProcessState: Equatable, Sendable {
    /// Running, or waiting for a CPU (`R`): not blocked on anything.
    public let isRunnable: Bool
    /// User and system time, in clock ticks (`sysconf(_SC_CLK_TCK)` a second).
    public let cpuTicks: UInt64

    public init(isRunnable: Bool, cpuTicks: UInt64) {
        self.isRunnable = isRunnable
        self.cpuTicks = cpuTicks
    }

    /// Parses a `/proc/PID/stat` line; nil when it is not one. The command name, in parentheses,
    /// may hold spaces and parentheses itself, so the fields are counted after its last `)`.
    public init?(procStat line: String) {
        guard let close = line.lastIndex(of: ")") else { return nil }
        // After the name: state (field 3), then fields 4 onwards; utime and stime are 14 and 15.
        let fields = line[line.index(after: close)...].split(separator: " ")
        guard fields.count >= 13, let state = fields[0].first, fields[0].count == 1,
            let user = UInt64(fields[11]), let system = UInt64(fields[12])
        else { return nil }
        self.init(isRunnable: state == "R", cpuTicks: user &+ system)
    }

    /// The state of process `pid` now; nil when it cannot be read (it has ended and been reaped,
    /// or this is not Linux).
    public static func of(_ pid: pid_t) -> ProcessState? {
        KernelFile.text(at: "/proc/\(pid)/stat", upTo: 1_024).flatMap(ProcessState.init(procStat:))
    }

    /// Clock ticks a second.
    public static let ticksPerSecond = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
}
