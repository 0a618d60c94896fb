import Foundation
import RegistryLoad

extension CPUTimes {
    /// The machine's CPU counters now, from `/proc/stat`; nil where there is none (not Linux).
    static func sample() -> CPUTimes? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        return CPUTimes(procStat: text)
    }
}
