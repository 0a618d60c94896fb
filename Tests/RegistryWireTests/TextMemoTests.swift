import RegistryCore
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
        // No set of four is asked to hold more than four of these 102 texts (in a direct-mapped
        // table of 1,024 slots, 10 of them would share a slot, each evicting the other).
        #expect(made == texts.count)
    }

    /// Texts that share a set stay side by side: in a memo of two slots (one set of two), any two
    /// texts in turn are each made once.
    @Test func textsThatShareASetAreEachMadeOnce() {
        var random = SplitMix64(seed: 5)
        for _ in 0..<50 {
            var memo = TextMemo<String>(slots: 2)
            let texts = (0..<2).map { _ in "com.load\(random.next() % 1_000).app\(random.next() % 4)" }
            guard texts[0] != texts[1] else { continue }
            var made = 0
            for round in 0..<10 {
                for text in texts { #expect(value(&memo, text, made: &made) == "value of " + text, "round \(round)") }
            }
            #expect(made == 2, "\(texts)")
        }
    }

    @Test func givesTheValueOfTheSameBytesWhenTextsCollide() {
        var memo = TextMemo<String>(slots: 2)
        var made = 0
        var random = SystemRandomNumberGenerator()
        // The last two have one hash (it reads the first and last eight bytes and the length),
        // so only their bytes tell them apart.
        let texts = ["a", "b", "c", "", "é", "com.x.y", "com.x.z", "com.y.y", "com.load1x.common.app", "com.load2x.common.app"]
        for _ in 0..<200 {
            let text = texts.randomElement(using: &random)!
            #expect(value(&memo, text, made: &made) == "value of " + text)
        }
    }

    /// A set holds its four newest texts: a fifth pushes out the oldest, and only it.
    @Test func aFullSetLosesItsOldestText() {
        var memo = TextMemo<String>(slots: 4)
        var made = 0
        for text in ["a", "b", "c", "d", "e"] { _ = value(&memo, text, made: &made) }
        #expect(made == 5)
        for text in ["b", "c", "d", "e"] { #expect(value(&memo, text, made: &made) == "value of " + text) }
        #expect(made == 5)
        #expect(value(&memo, "a", made: &made) == "value of a")
        #expect(made == 6)
    }

    /// Texts of every length up to 24 bytes that differ in one byte, at any place, and short
    /// texts that differ only by NULs (which the fingerprint's zero padding must not hide): each
    /// is told from the others, up to 16 bytes by the length and the first and last eight bytes
    /// alone, beyond by the bytes between too. Up to 16 bytes each is made once (the memo is big
    /// enough that no set of four overflows); longer texts that differ only between their first
    /// and last eight bytes hash alike, so more than four of them share a set and are made again.
    @Test func tellsApartTextsThatDifferInAnyOneByte() {
        var memo = TextMemo<String>(slots: 1 << 16)
        var made = 0
        var short = ["", "\0", "a\0", "\0a", "\0\0", String(repeating: "\0", count: 8), String(repeating: "\0", count: 9)]
        var long = [String]()
        for length in 1...24 {
            let plain = String(repeating: "a", count: length)
            var family = [plain]
            for place in 0..<length {
                var changed = Array(plain.utf8)
                changed[place] = UInt8(ascii: "b")
                family.append(String(decoding: changed, as: UTF8.self))
            }
            if length <= 16 { short += family } else { long += family }
        }
        #expect(Set(short + long).count == short.count + long.count)
        for round in 0..<2 {
            for text in short { #expect(value(&memo, text, made: &made) == "value of " + text, "round \(round): \(text.debugDescription)") }
        }
        #expect(made == short.count)
        for round in 0..<2 {
            for text in long { #expect(value(&memo, text, made: &made) == "value of " + text, "round \(round): \(text)") }
        }
    }

    /// Two texts longer than 16 bytes with the same length, first and last eight bytes, which
    /// only the bytes between tell apart, are each made once.
    @Test func textsThatDifferOnlyInTheMiddleAreEachMadeOnce() {
        var memo = TextMemo<String>(slots: 1024)
        var made = 0
        for _ in 0..<5 {
            for text in ["com.load1x.common.app", "com.load2x.common.app"] {
                #expect(value(&memo, text, made: &made) == "value of " + text)
            }
        }
        #expect(made == 2)
    }

    /// Bytes that are not valid UTF-8 are remembered by the bytes that came, in the memo's sets
    /// and not only as the last text: made once, into the repaired text, and told apart from
    /// the repaired text's own bytes.
    @Test func remembersTextsRepairedFromInvalidUTF8ByTheirBytes() {
        var memo = TextMemo<String>(slots: 1024)
        var made = 0
        let invalid: [UInt8] = Array("com.bad".utf8) + [0xC3, 0x28]
        let repaired = String(decoding: invalid, as: UTF8.self)
        for _ in 0..<3 {
            let got = invalid.withUnsafeBytes { bytes in
                memo.value(bytes) { text in
                    made += 1
                    return "value of " + text
                }
            }
            #expect(got == "value of " + repaired)
            // Another text in between, so that the next lookup cannot find it as the last.
            #expect(value(&memo, "com.other", made: &made) == "value of com.other")
        }
        #expect(made == 2)
        #expect(value(&memo, repaired, made: &made) == "value of " + repaired)
        #expect(made == 3, "the repaired text's bytes are not the bytes that came")
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
