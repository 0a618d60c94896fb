/// Durations as people type them: `250us`, `2ms`, `1.5s`, `2m`. Held as nanoseconds.
public struct DurationText: Hashable, Sendable, CustomStringConvertible {
    public let nanoseconds: UInt64

    public init(nanoseconds: UInt64) {
        self.nanoseconds = nanoseconds
    }

    private static let units: [(suffix: String, nanoseconds: Double)] = [
        ("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("h", 3600e9),
    ]

    public init(parsing text: String) throws(LoadConfigurationError) {
        // Longest suffix first, so "ms" is not read as "s".
        for (suffix, scale) in Self.units.sorted(by: { $0.suffix.count > $1.suffix.count }) where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard let value = Double(number), value.isFinite, value >= 0, value * scale < 1e18 else {
                throw .invalidDuration("\"\(text)\" is not a number followed by a unit")
            }
            self.init(nanoseconds: UInt64((value * scale).rounded()))
            return
        }
        throw .invalidDuration("\"\(text)\" needs a unit: ns, us, ms, s, m or h")
    }

    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public var description: String { Self.format(nanoseconds: nanoseconds) }

    /// Short human form: `850us`, `1.24ms`, `3.5s`.
    public static func format(nanoseconds: UInt64) -> String {
        let value = Double(nanoseconds)
        if value < 1e3 { return "\(nanoseconds)ns" }
        if value < 1e6 { return trimmed(value / 1e3) + "us" }
        if value < 1e9 { return trimmed(value / 1e6) + "ms" }
        return trimmed(value / 1e9) + "s"
    }

    private static func trimmed(_ value: Double) -> String {
        let digits = value >= 100 ? 0 : value >= 10 ? 1 : 2
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = digits == 0 ? String(Int(rounded)) : String(rounded)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }
}
