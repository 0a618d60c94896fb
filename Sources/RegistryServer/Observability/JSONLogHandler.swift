import Logging
import Platform

/// swift-log's handler for `--log-format json`: one JSON object a line on standard error,
/// `{"ts":"2026-11-26T03:15:00.123Z","level":"info","label":"registryd","message":"…","metadata":{…}}`.
/// Metadata values are strings (nested ones rendered as swift-log renders them). Each line goes
/// out in one `write`, so lines of concurrent threads do not interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    let label: String
    /// Where lines go; standard error unless a test gives its own.
    let output: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, output: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        output(Self.line(at: Self.wallClock(), level: event.level, label: label, message: "\(event.message)", metadata: merged))
    }

    /// The line for one event, with its newline; `time` is (seconds, milliseconds) since the
    /// Unix epoch.
    static func line(at time: (seconds: Int64, millis: Int), level: Logger.Level, label: String, message: String, metadata: Logger.Metadata)
        -> String
    {
        var line = "{\"ts\":\"\(iso8601(time))\",\"level\":\"\(level.rawValue)\",\"label\":"
        appendQuoted(label, to: &line)
        line += ",\"message\":"
        appendQuoted(message, to: &line)
        if !metadata.isEmpty {
            line += ",\"metadata\":{"
            for (index, key) in metadata.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                appendQuoted(key, to: &line)
                line += ":"
                appendQuoted("\(metadata[key]!)", to: &line)
            }
            line += "}"
        }
        return line + "}\n"
    }

    /// `text` as a JSON string: quotes, backslashes and control characters escaped.
    static func appendQuoted(_ text: String, to line: inout String) {
        line += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += "\\\""
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\r": line += "\\r"
            case "\t": line += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                line += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: line.unicodeScalars.append(scalar)
            }
        }
        line += "\""
    }

    /// UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil date from days since the epoch, proleptic Gregorian).
    static func iso8601(_ time: (seconds: Int64, millis: Int)) -> String {
        let days = time.seconds >= 0 ? time.seconds / 86_400 : (time.seconds - 86_399) / 86_400
        let secondOfDay = Int(time.seconds - days * 86_400)
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = time.millis < 10 ? "00\(time.millis)" : time.millis < 100 ? "0\(time.millis)" : "\(time.millis)"
        return "\(year)-\(two(Int(month)))-\(two(Int(day)))T\(two(secondOfDay / 3_600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)).\(millis)Z"
    }

    static func wallClock() -> (seconds: Int64, millis: Int) {
        let millis = SystemClock.wallMillis()
        return (Int64(millis / 1_000), Int(millis % 1_000))
    }

    /// Writes a line to standard error in one call.
    public static let standardError: @Sendable (String) -> Void = { line in
        var line = line
        line.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
    }
}
