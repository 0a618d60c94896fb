import Testing

@testable import RegistryWire

/// ``TextMemo``: a value is made once per text while the texts fit its slots, the value given is
/// always the one made from the same bytes, and refusals are not remembered.
@Suite struct TextMemoTests {
    /// Looks `text` up, counting the values made.
    func value(_ memo: inout TextMemo<String>, _ text: String, made: inout Int) -> String? {
        Array(text.utf8).withUnsafeBytes { bytes in
            memo.value(bytes) { text in
                made += 1
                return text.hasPrefix("bad") ? nil : "value of " + text
            }
        }
    }

    @Test func makesEachTextOnceWhenTheyFit() {
        var memo = TextMemo<String>(slots: 1024)
        // A vendor's apps differ in their last byte only: the hash must spread those too.
        let texts = (0..<34).flatMap { vendor in (0..<3).map { "com.load\(vendor).app\($0)" } }
        var made = 0
        for round in 0..<5 {
            for text in texts.shuffled() {
                #expect(value(&memo, text, made: &made) == "value of " + text, "round \(round)")
            }
        }
        // Direct-mapped: two texts may share a slot and evict each other, but not most of them.
        #expect(made < 2 * texts.count)
    }

    @Test func givesTheValueOfTheSameBytesWhenTextsCollide() {
        var memo = TextMemo<String>(slots: 2)
        var made = 0
        var random = SystemRandomNumberGenerator()
        let texts = ["a", "b", "c", "", "é", "com.x.y", "com.x.z", "com.y.y"]
        for _ in 0..<200 {
            let text = texts.randomElement(using: &random)!
            #expect(value(&memo, text, made: &made) == "value of " + text)
        }
    }

    @Test func doesNotRememberRefusals() {
        var memo = TextMemo<String>(slots: 1)
        var made = 0
        #expect(value(&memo, "bad one", made: &made) == nil)
        #expect(value(&memo, "bad one", made: &made) == nil)
        #expect(made == 2)
        #expect(value(&memo, "good", made: &made) == "value of good")
        #expect(value(&memo, "good", made: &made) == "value of good")
        #expect(made == 3)
    }
}
