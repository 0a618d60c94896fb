/// The machine-wide CPU time counters of Linux's `/proc/stat` (its first, aggregate `cpu`
/// line), in clock ticks. Two samples give ``CPUShares`` for the time between them, which
/// tells whether a run's latency tail came from the server or from the machine under it.
/// Pure: the caller reads the file.
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

    public init(user: UInt64, nice: UInt64, system: UInt64, idle: UInt64, iowait: UInt64, irq: UInt64, softirq: UInt64, steal: UInt64) {
        self.user = user
        self.nice = nice
        self.system = system
        self.idle = idle
        self.iowait = iowait
        self.irq = irq
        self.softirq = softirq
        self.steal = steal
    }

    /// Parses the aggregate `cpu ` line of `/proc/stat`; nil when there is none or it has
    /// fewer than the eight fields every Linux since 2.6.11 writes.
    public init?(procStat: String) {
        guard let line = procStat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard fields.count >= 8 else { return nil }
        self.init(
            user: fields[0], nice: fields[1], system: fields[2], idle: fields[3], iowait: fields[4], irq: fields[5],
            softirq: fields[6], steal: fields[7])
    }

    var total: UInt64 { user + nice + system + idle + iowait + irq + softirq + steal }
    var busy: UInt64 { user + nice + system + irq + softirq }
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

    /// The shares from `start` to `end`; nil when no tick passed or the counters went backwards.
    public init?(from start: CPUTimes, to end: CPUTimes) {
        guard end.total > start.total, end.busy >= start.busy, end.iowait >= start.iowait, end.steal >= start.steal else {
            return nil
        }
        let total = Double(end.total - start.total)
        self.init(
            busy: Double(end.busy - start.busy) / total, iowait: Double(end.iowait - start.iowait) / total,
            steal: Double(end.steal - start.steal) / total)
    }
}
