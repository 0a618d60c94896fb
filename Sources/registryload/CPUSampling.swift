import Foundation
import LoadGeneration

/// The machine's CPU counters at one moment, from `/proc/stat`, with the monotonic time they were
/// read at: two samples give the ``CPUShares`` of the time between them.
struct CPUSample {
    let times: CPUTimes
    let nanos: UInt64

    /// Now; nil where there is no `/proc/stat` (not Linux).
    static func now() -> CPUSample? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let times = CPUTimes(procStat: text) else {
            return nil
        }
        return CPUSample(times: times, nanos: monotonicNanos())
    }

    /// The shares of the machine's CPU time from `start` to this sample.
    func shares(since start: CPUSample) -> CPUShares? {
        guard nanos > start.nanos else { return nil }
        return CPUShares(
            from: start.times, to: times, seconds: Double(nanos - start.nanos) / 1e9, ticksPerSecond: sysconf(Int32(_SC_CLK_TCK)))
    }
}
