import Testing
@testable import RegistryCore

@Suite struct InternerTests {
    /// A value whose hash the test chooses, so that values collide in the table.
    struct Collider: Internable {
        let name: String
        let internHash: UInt64
    }

    @Test(arguments: [UInt64(1), 2])
    func numbersAreDenseStableAndFoundAgainThroughGrowth(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var interner = Interner<String>()
        var reference = [String: UInt32]()
        for _ in 0..<5_000 {
            let text = "com.vendor\(random.next() % 3_000).app"
            let number = interner.intern(text)
            if let known = reference[text] {
                #expect(number == known)
            } else {
                #expect(number == UInt32(reference.count))
                reference[text] = number
            }
        }
        for (text, number) in reference {
            #expect(interner.number(of: text) == number)
            #expect(interner[number] == text)
        }
        #expect(interner.number(of: "com.never.seen") == nil)
    }

    @Test func valuesWhoseHashesCollideAreToldApart() {
        var interner = Interner<Collider>()
        let values = (0..<100).map { Collider(name: "v\($0)", internHash: UInt64($0 % 3)) }
        for (index, value) in values.enumerated() { #expect(interner.intern(value) == UInt32(index)) }
        for (index, value) in values.enumerated() { #expect(interner.number(of: value) == UInt32(index)) }
        #expect(interner.number(of: Collider(name: "other", internHash: 1)) == nil)
    }

    @Test func equalTextsHashAlikeAndTheHashSeesEveryByte() {
        let base = "com.example.application"
        // The same text in other storage: copied out of a longer string, and decoded from bytes;
        // and a short text, which Swift keeps inline, against the same text on the heap.
        let longer = "prefix/" + base + "/suffix"
        let copied = String(longer.dropFirst(7).dropLast(7))
        #expect(copied == base && TextHash.of(copied) == TextHash.of(base))
        #expect(TextHash.of(String(decoding: Array(base.utf8), as: UTF8.self)) == TextHash.of(base))
        let short = "com.v"
        let shortOnHeap = String(("com.v" + String(repeating: "x", count: 40)).prefix(5))
        #expect(shortOnHeap == short && TextHash.of(shortOnHeap) == TextHash.of(short))
        var seen = Set<UInt64>()
        for length in 0...base.utf8.count { seen.insert(TextHash.of(String(base.utf8.prefix(length))!)) }
        for index in base.indices {
            var changed = base
            changed.replaceSubrange(index...index, with: "#")
            seen.insert(TextHash.of(changed))
        }
        #expect(seen.count == base.utf8.count + 1 + base.count)
    }
}
