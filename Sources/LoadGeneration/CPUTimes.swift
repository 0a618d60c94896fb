/// The machine-wide CPU time counters of Linux's `/proc/stat` (its first, aggregate `cpu`
/// line), in clock ticks, and the number of CPUs it sums. Two samples and the time between them
/// give ``CPUShares``, which tell whether a run's latency tail came from the server or from the
/// machine under it. Pure: the caller reads the file and the clock.
public struct CPUTimes: Equatable, Sendable {
    public var user: UInt64
    public var nice: UInt64
    public var system: UInt64
    public var idle: UInt64
    public var iowait: UInt64
    public var irq: UInt64
    public var softirq: UInt64
    /// Time the hypervisor ran something else while this machine's CPUs had work.
    public var steal: UInt64
    /// The `cpuN` lines: the CPUs the aggregate line adds up.
    public var cpus: Int

    public init(
        user: UInt64, nice: UInt64, system: UInt64, idle: UInt64, iowait: UInt64, irq: UInt64, softirq: UInt64, steal: UInt64,
        cpus: Int
    ) {
        self.user = user
        self.nice = nice
        self.system = system
        self.idle = idle
        self.iowait = iowait
        self.irq = irq
        self.softirq = softirq
        self.steal = steal
        self.cpus = cpus
    }

    /// Parses the aggregate `cpu ` line of `/proc/stat` and counts its `cpuN` lines; nil when
    /// either is missing or the aggregate has fewer than the eight fields every Linux since
    /// 2.6.11 writes.
    public init?(procStat: String) {
        let lines = procStat.split(separator: "\n")
        guard let line = lines.first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        let cpus = lines.count { $0.hasPrefix("cpu") && $0.dropFirst(3).first?.isNumber == true }
        guard fields.count >= 8, cpus > 0 else { return nil }
        self.init(
            user: fields[0], nice: fields[1], system: fields[2], idle: fields[3], iowait: fields[4], irq: fields[5],
            softirq: fields[6], steal: fields[7], cpus: cpus)
    }
}

/// How the machine's CPU time was spent between two ``CPUTimes`` samples, as shares of it.
public struct CPUShares: Codable, Equatable, Sendable {
    /// Running code (user, system and interrupts), whoever's it was.
    public let busy: Double
    public let iowait: Double
    /// Taken by the hypervisor: on a shared virtual machine, the main source of latency tails
    /// that no change to the server can remove.
    public let steal: Double

    /// Steal at or above this share gets a warning in the report.
    public static let noticeableSteal = 0.05

    enum CodingKeys: String, CodingKey {
        case busy = "busy_share"
        case iowait = "iowait_share"
        case steal = "steal_share"
    }

    public init(busy: Double, iowait: Double, steal: Double) {
        self.busy = busy
        self.iowait = iowait
        self.steal = steal
    }

    /// The shares of the CPU time the machine had in the `seconds` from `start` to `end`
    /// (`ticksPerSecond` ticks a second on each CPU); nil when no time passed, the CPUs changed,
    /// or the counters went backwards.
    ///
    /// Busy time is what was neither idle, waiting for I/O, nor stolen. It is not the sum of the
    /// user and system counters: a tickless kernel measures idle time exactly, on entry to and
    /// exit from idle, but charges user and system time to whatever runs when a tick lands, and
    /// work that wakes on a timer can fall between ticks (docs/performance.md has how far apart
    /// the two were).
    public init?(from start: CPUTimes, to end: CPUTimes, seconds: Double, ticksPerSecond: Int) {
        guard seconds > 0, ticksPerSecond > 0, start.cpus == end.cpus, end.idle >= start.idle, end.iowait >= start.iowait,
            end.steal >= start.steal
        else { return nil }
        let capacity = seconds * Double(ticksPerSecond) * Double(end.cpus)
        let iowait = Double(end.iowait - start.iowait) / capacity
        let steal = Double(end.steal - start.steal) / capacity
        let idle = Double(end.idle - start.idle) / capacity
        self.init(busy: min(1, max(0, 1 - idle - iowait - steal)), iowait: min(1, iowait), steal: min(1, steal))
    }
}
