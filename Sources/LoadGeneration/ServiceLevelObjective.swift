/// A latency objective such as `p99=2ms`, `p99.9=10ms` or `max=50ms`, checked after a run.
public struct ServiceLevelObjective: Hashable, Sendable, CustomStringConvertible {
    /// The percentile in (0, 100]; `max` is 100.
    public let percentile: Double
    public let limit: DurationText

    public init(percentile: Double, limit: DurationText) {
        self.percentile = percentile
        self.limit = limit
    }

    public init(parsing text: String) throws(LoadConfigurationError) {
        let pieces = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard pieces.count == 2 else { throw .invalidObjective("\"\(text)\" is not of the form p99=2ms") }
        let name = pieces[0].trimmingSpaces.lowercased()
        let percentile: Double
        if name == "max" {
            percentile = 100
        } else if name.hasPrefix("p"), let value = Double(name.dropFirst()), value > 0, value <= 100 {
            percentile = value
        } else {
            throw .invalidObjective("\"\(name)\" is not a percentile such as p50, p99, p99.9 or max")
        }
        let limit: DurationText
        do {
            limit = try DurationText(parsing: pieces[1].trimmingSpaces)
        } catch {
            throw .invalidObjective("\(text): \(error)")
        }
        self.init(percentile: percentile, limit: limit)
    }

    public var name: String {
        if percentile == 100 { return "max" }
        let whole = percentile.rounded() == percentile
        return "p" + (whole ? String(Int(percentile)) : String(percentile))
    }

    public var description: String { "\(name)=\(limit)" }

    /// Whether a measured value meets the objective.
    public func isMet(by measuredNanoseconds: UInt64) -> Bool { measuredNanoseconds <= limit.nanoseconds }
}
