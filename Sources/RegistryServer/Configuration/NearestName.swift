/// The known name a misspelled one most likely meant, for "did you mean" in error messages.
enum NearestName {
    /// The name among `names` with the fewest single-character edits from `name` (ignoring
    /// case), when that is at most a third of its length (and at least 2); nil when none is.
    static func closest(to name: String, among names: [String]) -> String? {
        let wanted = Array(name.lowercased())
        let limit = max(2, wanted.count / 3)
        var best: (name: String, distance: Int)?
        for candidate in names {
            let distance = editDistance(wanted, Array(candidate.lowercased()))
            if distance <= limit, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        return best?.name
    }

    /// Levenshtein distance: insertions, deletions and substitutions.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            current.reserveCapacity(b.count + 1)
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
