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
    /// A digest of the rules, equal for lists that hold the same rules in any order.
    public private(set) var fingerprint: UInt64 = 0

    /// Reads the list's text (the format of `public_suffix_list.dat`): one rule a line, `//`
    /// comments and blank lines skipped, each rule ending at the first white space. Rules are
    /// compared without regard to ASCII case. Works on the text's bytes: a node reads the whole
    /// list (some 10,000 rules) at every start.
    public init(parsing text: String) throws(Invalid) {
        var number = 0
        var bytes = Array(text.utf8)
        bytes.append(UInt8(ascii: "\n"))
        var lineStart = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: "\n") || bytes[index] == UInt8(ascii: "\r") {
            defer { lineStart = index + 1 }
            // "\r\n" is one line end: lists with either line ending read alike.
            if bytes[index] == UInt8(ascii: "\n"), index > 0, bytes[index - 1] == UInt8(ascii: "\r"), lineStart == index { continue }
            number += 1
            var end = lineStart
            while end < index, bytes[end] != UInt8(ascii: " "), bytes[end] != UInt8(ascii: "\t") { end += 1 }
            guard end > lineStart else { continue }
            let line = bytes[lineStart..<end]
            if line.starts(with: [UInt8(ascii: "/"), UInt8(ascii: "/")]) { continue }
            try insert(rule: line, line: number)
        }
        guard !(plain.isEmpty && wildcards.isEmpty) else { throw Invalid(line: number, reason: "the list holds no rule") }
        fingerprint = Self.fingerprint(ruleText)
    }

    /// Adds one rule, given as its bytes.
    private mutating func insert(rule line: ArraySlice<UInt8>, line number: Int) throws(Invalid) {
        let shown = String(decoding: line, as: UTF8.self)
        var rule = line
        let isException = rule.first == UInt8(ascii: "!")
        if isException { rule = rule.dropFirst() }
        var labels = rule.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard !labels.isEmpty, labels.allSatisfy({ !$0.isEmpty }) else {
            throw Invalid(line: number, reason: "\"\(shown)\" has an empty label")
        }
        let isWildcard = labels.first.map { $0.elementsEqual([UInt8(ascii: "*")]) } ?? false
        if isWildcard { labels.removeFirst() }
        guard !labels.isEmpty, !labels.contains(where: { $0.contains(UInt8(ascii: "*")) }) else {
            throw Invalid(line: number, reason: "\"\(shown)\" may hold a wildcard only as its first label, before another")
        }
        guard !(isException && isWildcard), !isException || labels.count >= 2 else {
            throw Invalid(line: number, reason: "\"\(shown)\": an exception names a whole domain below a suffix")
        }
        var key = [UInt8]()
        key.reserveCapacity(rule.count)
        for label in labels.reversed() {
            if !key.isEmpty { key.append(UInt8(ascii: ".")) }
            // ASCII letters lowered; other bytes (the list's Unicode rules) as they are.
            for byte in label { key.append((UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte) }
        }
        let text = String(decoding: key, as: UTF8.self)
        if isException {
            exceptions.insert(text)
        } else if isWildcard {
            wildcards.insert(text)
        } else {
            plain.insert(text)
        }
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

    /// The digest of a list's ``ruleText``; never 0.
    private static func fingerprint(_ ruleText: String) -> UInt64 { max(StateDigest.text(ruleText), 1) }

    /// Lists are equal when they hold the same rules.
    public static func == (lhs: PublicSuffixList, rhs: PublicSuffixList) -> Bool {
        lhs.fingerprint == rhs.fingerprint && lhs.plain == rhs.plain && lhs.wildcards == rhs.wildcards && lhs.exceptions == rhs.exceptions
    }
}
