import Testing
@testable import RegistryServer

/// ``BufferedRandom``: words from the kernel's random source, refilled 512 at a time.
@Suite struct BufferedRandomTests {
    /// Across several refills, no word repeats and no word is zero (each has odds of 2^-64), and
    /// two generators give different words: a fill that failed silently would leave zeros or
    /// repeat its buffer.
    @Test func wordsAcrossRefillsAreDistinctAndNonZero() {
        var first = BufferedRandom()
        var second = BufferedRandom()
        let words = (0..<2_000).map { _ in first.next() }
        let others = (0..<2_000).map { _ in second.next() }
        #expect(Set(words).count == words.count)
        #expect(!words.contains(0))
        #expect(Set(words).isDisjoint(with: others))
        // Each bit is set in about half of the words: 1000 ± 5σ (σ = √(2000 / 4) ≈ 22.4), which
        // all 64 bits of a uniform source meet but in about 4 runs of 100,000.
        for bit in 0..<64 {
            let set = words.count { $0 & (1 << UInt64(bit)) != 0 }
            #expect((888...1_112).contains(set), "bit \(bit) set in \(set) of 2000")
        }
    }
}
