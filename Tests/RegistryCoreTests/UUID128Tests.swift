import Testing
@testable import RegistryCore

@Suite struct UUID128Tests {
    @Test func parsesEitherCaseAndPrintsLowerCase() throws {
        let upper = try #require(UUID128(text: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        let lower = try #require(UUID128(text: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"))
        #expect(upper == lower)
        #expect(upper.text == "e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
        #expect(upper.bytes.count == 16)
        #expect(UUID128(bytes: upper.bytes) == upper)
    }

    @Test(arguments: [
        "", "e621e1f8c36c495a93fc0c247a3e6e5f", "e621e1f8-c36c-495a-93fc-0c247a3e6e5", "e621e1f8-c36c-495a-93fc-0c247a3e6e5ff",
        "g621e1f8-c36c-495a-93fc-0c247a3e6e5f", "e621e1f8_c36c-495a-93fc-0c247a3e6e5f", "{e621e1f8-c36c-495a-93fc-0c247a3e6e5f}",
        "e621e1f8-c36c-495a-93fc-0c247a3e6é5f",
        // A bad digit in each group, and a dash where a digit belongs.
        "e621e1fz-c36c-495a-93fc-0c247a3e6e5f", "e621e1f8-c36x-495a-93fc-0c247a3e6e5f", "e621e1f8-c36c-49 a-93fc-0c247a3e6e5f",
        "e621e1f8-c36c-495a-93f:-0c247a3e6e5f", "e621e1f8-c36c-495a-93fc-0c247a3e6e5G", "e621e1f8-c36c-495a-93fc-0c247a3e6e-f",
    ])
    func rejectsMalformedText(_ text: String) {
        #expect(UUID128(text: text) == nil)
    }

    @Test func parsingAgreesWithACharacterByCharacterReading() {
        // The oracle reads one character at a time: 36 characters, dashes at 8, 13, 18 and 23,
        // hex digits elsewhere; the value by UInt64(_:radix:); the cases by the letters seen.
        func oracle(_ bytes: [UInt8]) -> (value: UUID128, lower: Bool, upper: Bool)? {
            guard bytes.count == 36 else { return nil }
            var hex = ""
            var lower = false
            var upper = false
            for (offset, byte) in bytes.enumerated() {
                if [8, 13, 18, 23].contains(offset) {
                    guard byte == UInt8(ascii: "-") else { return nil }
                    continue
                }
                let character = Character(Unicode.Scalar(byte))
                guard byte < 0x80, character.isHexDigit else { return nil }
                if character.isLetter { if character.isLowercase { lower = true } else { upper = true } }
                hex.append(character)
            }
            let digits = Array(hex)
            return (UUID128(high: UInt64(String(digits[0..<16]), radix: 16)!, low: UInt64(String(digits[16..<32]), radix: 16)!), lower, upper)
        }
        var generator = SplitMix64(seed: 23)
        var accepted = 0
        for round in 0..<20_000 {
            let value = UUID128(high: generator.next(), low: generator.next())
            var bytes = Array(value.text.utf8)
            // Letters in upper case at random, then (most rounds) bytes replaced at random,
            // often with ones near the hex ranges' edges.
            for index in bytes.indices where (0x61...0x66).contains(bytes[index]) && generator.next() % 3 == 0 { bytes[index] -= 0x20 }
            if round % 4 != 0 {
                for _ in 0..<Int(generator.next() % 3) {
                    let edges: [UInt8] = [0x2F, 0x30, 0x39, 0x3A, 0x40, 0x41, 0x46, 0x47, 0x60, 0x61, 0x66, 0x67, 0x7F, 0x80, 0xC1, 0xE6, 0xFF, 0x00, 0x2D]
                    let byte = generator.next() % 2 == 0 ? edges[Int(generator.next() % UInt64(edges.count))] : UInt8(truncatingIfNeeded: generator.next())
                    bytes[Int(generator.next() % 36)] = byte
                }
            }
            let parsed = bytes.withUnsafeBufferPointer { UUID128.parseNoting($0) }
            let expected = oracle(bytes)
            #expect(parsed?.value == expected?.value && parsed?.lower == expected?.lower && parsed?.upper == expected?.upper, "\(bytes)")
            if expected != nil { accepted += 1 }
        }
        // Both outcomes occur often.
        #expect(accepted > 5_000 && accepted < 15_000)
    }

    @Test func randomValuesRoundTripThroughTextAndBytes() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<1000 {
            let value = UUID128(high: generator.next(), low: generator.next())
            #expect(UUID128(text: value.text) == value)
            #expect(UUID128(bytes: value.bytes) == value)
        }
        #expect(UUID128(bytes: [UInt8](repeating: 1, count: 15)) == nil)
    }

    @Test func textMatchesADigitByDigitFormatting() {
        // The word-at-a-time writer against the plainest formatting there is, in both cases.
        func reference(_ value: UUID128, uppercase: Bool) -> String {
            let hex = [value.high, value.low].map { word in
                let digits = String(word, radix: 16, uppercase: uppercase)
                return String(repeating: "0", count: 16 - digits.count) + digits
            }.joined()
            let characters = Array(hex)
            return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(characters[$0]) }.joined(separator: "-")
        }
        var generator = SplitMix64(seed: 11)
        var values = [UUID128.zero, UUID128(high: .max, low: .max), UUID128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)]
        for _ in 0..<1000 { values.append(UUID128(high: generator.next(), low: generator.next())) }
        for value in values {
            #expect(value.text == reference(value, uppercase: false))
            var buffer = [UInt8](repeating: 0, count: UUID128.textLength)
            buffer.withUnsafeMutableBufferPointer { value.writeText(to: $0, uppercase: true) }
            #expect(String(decoding: buffer, as: UTF8.self) == reference(value, uppercase: true))
        }
    }

    @Test func orderIsByBigEndianBytes() {
        let a = UUID128(text: "00000000-0000-0000-0000-0000000000ff")!
        let b = UUID128(text: "00000000-0000-0000-0100-000000000000")!
        let c = UUID128(text: "01000000-0000-0000-0000-000000000000")!
        #expect(a < b && b < c)
    }

    @Test func mintedDeviceIDsAreVersion7AndTimeOrdered() {
        var generator = SplitMix64(seed: 1)
        let early = DeviceID.mint(at: HLCTimestamp(millis: 1_000, counter: 0), using: &generator)
        let late = DeviceID.mint(at: HLCTimestamp(millis: 2_000, counter: 0), using: &generator)
        #expect(early < late)
        let text = early.description
        #expect(Array(text)[14] == "7")
        #expect("89ab".contains(Array(text)[19]))
        #expect(throws: IdentityError.invalidDeviceID("nope")) { try DeviceID(parsing: "nope") }
    }
}
