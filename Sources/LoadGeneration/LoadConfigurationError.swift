/// Why a `registryload` option or a combination of options cannot be used.
public enum LoadConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidWorkload(String)
    case invalidDuration(String)
    case invalidObjective(String)
    case invalidOption(String)

    public var description: String {
        switch self {
        case .invalidWorkload(let reason): return "invalid --workload: \(reason)"
        case .invalidDuration(let reason): return "invalid duration: \(reason)"
        case .invalidObjective(let reason): return "invalid --slo: \(reason)"
        case .invalidOption(let reason): return reason
        }
    }
}
