/// The Public Suffix List (publicsuffix.org), read for bundle IDs: where a reverse-DNS bundle ID's
/// vendor part ends. `uk.co.bbc.iplayer` and `uk.co.tesco.app` are two vendors (`uk.co` is a
/// public suffix), and `com.acme.mail` is `com.acme`.
///
/// A bundle ID's labels are a domain's labels read from the top-level domain down, so a rule
/// `co.uk` is looked up as `uk.co`. The prevailing rule is the list's: an exception rule (`!`)
/// wins, and otherwise the matching rule with the most labels, a wildcard (`*`) matching any one
/// label; with none, the top-level label alone is the suffix. The vendor is the suffix and one
/// label more.
///
/// ``DefaultVendorScope/publicSuffix(_:)`` makes it name the vendor of a bundle no vendor rule
/// matches.
public struct PublicSuffixList: Sendable, Equatable {
    /// A rule that could not be read; `line` counts from 1.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "public suffix list, line \(line): \(reason)" }
    }

    /// Rules, each as its labels from the top down joined by dots (`co.uk` as `uk.co`).
    private var plain: Set<String> = []
    /// Wildcard rules (`*.ck`), each as the labels above its wildcard (`ck`).
    private var wildcards: Set<String> = []
    /// Exception rules (`!www.ck`), as `ck.www`.
    private var exceptions: Set<String> = []

    /// Reads the list's text (the format of `public_suffix_list.dat`): one rule a line, `//`
    /// comments and blank lines skipped, each rule ending at the first white space. Rules are
    /// compared without regard to ASCII case.
    public init(parsing text: String) throws(Invalid) {
        var number = 0
        // Character-wise, "\r\n" is one newline: lists with either line ending read alike.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            let line = rawLine.prefix { !$0.isWhitespace }
            if line.isEmpty || line.hasPrefix("//") { continue }
            var rule = Substring(line.lowercased())
            let isException = rule.hasPrefix("!")
            if isException { rule = rule.dropFirst() }
            var labels = rule.split(separator: ".", omittingEmptySubsequences: false)
            guard !labels.isEmpty, labels.allSatisfy({ !$0.isEmpty }) else {
                throw Invalid(line: number, reason: "\"\(line)\" has an empty label")
            }
            let isWildcard = labels.first == "*"
            if isWildcard { labels.removeFirst() }
            guard !labels.isEmpty, !labels.contains(where: { $0.contains("*") }) else {
                throw Invalid(line: number, reason: "\"\(line)\" may hold a wildcard only as its first label, before another")
            }
            guard !(isException && isWildcard), !isException || labels.count >= 2 else {
                throw Invalid(line: number, reason: "\"\(line)\": an exception names a whole domain below a suffix")
            }
            let key = labels.reversed().joined(separator: ".")
            if isException {
                exceptions.insert(key)
            } else if isWildcard {
                wildcards.insert(key)
            } else {
                plain.insert(key)
            }
        }
        guard !(plain.isEmpty && wildcards.isEmpty) else { throw Invalid(line: number, reason: "the list holds no rule") }
    }

    /// How many rules the list holds.
    public var ruleCount: Int { plain.count + wildcards.count + exceptions.count }

    /// The number of leading labels of `labels` (a bundle ID's, top-level first) that name its
    /// vendor: the public suffix and one label more, or every label when there is no more.
    public func vendorLabelCount<Label: StringProtocol>(_ labels: [Label]) -> Int {
        let lowered = labels.map { $0.lowercased() }
        var suffix = 1
        var path = ""
        for (index, label) in lowered.enumerated() {
            let parent = path
            path = index == 0 ? label : path + "." + label
            let length = index + 1
            if exceptions.contains(path) {
                suffix = length - 1
                break
            }
            if plain.contains(path) || (index > 0 && wildcards.contains(parent)) { suffix = max(suffix, length) }
        }
        return min(suffix + 1, labels.count)
    }

    /// The rules in the list's own format, one a line, sorted: what a pin keeps, and reads back
    /// into an equal list.
    public var ruleText: String {
        func domain(_ key: String) -> String { key.split(separator: ".").reversed().joined(separator: ".") }
        var text = ""
        for rule in plain.sorted() { text += domain(rule) + "\n" }
        for rule in wildcards.sorted() { text += "*." + domain(rule) + "\n" }
        for rule in exceptions.sorted() { text += "!" + domain(rule) + "\n" }
        return text
    }

    /// A digest of the rules, equal for lists that hold the same rules in any order.
    public var fingerprint: UInt64 {
        var text = ""
        for rule in plain.sorted() { text += "\(rule)\n" }
        for rule in wildcards.sorted() { text += "*\(rule)\n" }
        for rule in exceptions.sorted() { text += "!\(rule)\n" }
        return max(StateDigest.text(text), 1)
    }
}
