/// One setting of a node, described once: its flag, environment variable and config-file key,
/// its default and help, and how its text becomes part of a ``NodeConfiguration``.
/// ``NodeConfiguration/resolve(flags:environment:)`` takes each setting from, strongest first,
/// the flag, the environment variable, the config file, and otherwise leaves the default.
public struct NodeSetting: Sendable {
    /// The JSON type the config file must give the value as.
    public enum FileType: Sendable, CustomStringConvertible {
        case string
        case wholeNumber
        case number
        /// JSON true or false; as a flag, present or absent.
        case boolean

        public var description: String {
            switch self {
            case .boolean: return "true or false"
            case .string: return "a string"
            case .wholeNumber: return "a whole number"
            case .number: return "a number"
            }
        }
    }

    /// The long flag, without its dashes (`commit-delay-us`).
    public let flag: String
    /// The environment variable, when the setting has one.
    public let environment: String?
    /// The key in the JSON config file.
    public let fileKey: String
    public let fileType: FileType
    /// The default, as the help shows it.
    public let defaultText: String
    /// What it does, one sentence (the `--help` abstract).
    public let help: String
    /// More, when one sentence is not enough (the `--help` discussion).
    public let discussion: String
    /// Parses the value's text into the configuration; the message says what is wrong with it.
    let apply: @Sendable (String, inout NodeConfiguration) throws(SettingValueError) -> Void

    init(
        flag: String, environment: String?, fileKey: String, fileType: FileType, defaultText: String, help: String,
        discussion: String = "", apply: @escaping @Sendable (String, inout NodeConfiguration) throws(SettingValueError) -> Void
    ) {
        self.flag = flag
        self.environment = environment
        self.fileKey = fileKey
        self.fileType = fileType
        self.defaultText = defaultText
        self.help = help
        self.discussion = discussion
        self.apply = apply
    }

    /// The help line `--help` shows: what it does, then where else it can be set and its default.
    public var helpLine: String {
        var line = help
        if let environment { line += " [env: \(environment)]" }
        return line + " [default: \(defaultText)]"
    }
}

/// Why a setting's text was refused, without saying where it came from (the resolver adds that).
struct SettingValueError: Error {
    let reason: String

    init(_ reason: String) {
        self.reason = reason
    }

    /// `text` as a whole number in `range`, or an error naming `what`.
    static func wholeNumber(_ text: String, in range: ClosedRange<Int>, _ what: String) throws(SettingValueError) -> Int {
        guard let value = Int(text) else { throw SettingValueError("\(what) \(text.debugDescription) is not a whole number") }
        guard range.contains(value) else { throw SettingValueError("\(what) \(value) is not \(range.lowerBound)...\(range.upperBound)") }
        return value
    }
}
