import Testing
@testable import RegistryCore

@Suite struct UUIDTextTests {
    private func fromWire(_ text: String) -> UUIDText {
        var text = text
        return text.withUTF8 { UUIDText(utf8: $0) }
    }

    @Test(arguments: [
        "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "00000000-0000-0000-0000-000000000000",
    ])
    func uuidTextInOneCaseIsKeptAsItsValueAndReadBackExactly(_ text: String) throws {
        let value = fromWire(text)
        guard case .uuid(let uuid, _) = value.form else {
            Issue.record("\(text) was kept as a string")
            return
        }
        #expect(uuid == UUID128(text: text))
        #expect(value.text == text)
        #expect(value.uuid == UUID128(text: text))
        #expect(value.utf8Count == text.utf8.count)
        var written = [UInt8](repeating: 0, count: value.utf8Count)
        written.withUnsafeMutableBufferPointer { value.writeUTF8(to: $0.baseAddress!) }
        #expect(written == Array(text.utf8))
    }

    @Test(arguments: [
        "E621e1f8-c36c-495a-93fc-0c247a3e6e5f", "not a uuid", "", "e621e1f8c36c495a93fc0c247a3e6e5f", "e621e1f8-c36c-495a-93fc-0c247a3e6é5f",
    ])
    func anythingElseIsKeptAsTheTextItself(_ text: String) {
        let value = fromWire(text)
        guard case .text(let kept) = value.form else {
            Issue.record("\(text) was not kept as text")
            return
        }
        #expect(kept == text)
        #expect(value.text == text)
        #expect(value.utf8Count == text.utf8.count)
        // Mixed case still parses as a UUID; the form only keeps the exact text.
        #expect(value.uuid == UUID128(text: text))
    }

    @Test func invalidUTF8IsRepairedAsStringDecodingDoes() {
        let bytes: [UInt8] = [0x61, 0xFF, 0x62]
        let value = bytes.withUnsafeBufferPointer { UUIDText(utf8: $0) }
        #expect(value.text == String(decoding: bytes, as: UTF8.self))
    }

    @Test func comparesAndHashesAsItsTextWhateverItsForm() {
        let text = "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"
        let forms = [fromWire(text), UUIDText(text), UUIDText(uuid: UUID128(text: text)!)]
        for a in forms {
            for b in forms {
                #expect(a == b)
                #expect(a.hashValue == b.hashValue)
            }
        }
        #expect(fromWire(text) != fromWire(text.uppercased()))
        #expect(UUIDText(text.uppercased()) == fromWire(text.uppercased()))
    }

    @Test func presentedIdentifiersValidateFromEitherForm() throws {
        let upper = "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
        let fromText = try Identifier(PresentedIdentifier(rawKind: 1, text: upper))
        let fromBytes = try Identifier(PresentedIdentifier(rawKind: 1, value: fromWire(upper)))
        #expect(fromText == fromBytes)
        #expect(fromText.value.text == upper.lowercased())
        #expect(throws: IdentityError.invalidIdentifier("keychain \"nope\" is not UUID text")) {
            try Identifier(PresentedIdentifier(rawKind: 1, value: fromWire("nope")))
        }
        #expect(throws: IdentityError.invalidIdentifier("idfv is the all-zero UUID")) {
            try Identifier(PresentedIdentifier(rawKind: 2, value: fromWire("00000000-0000-0000-0000-000000000000")))
        }
    }

    @Test func writesTextInEitherCase() {
        let value = UUID128(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        var buffer = [UInt8](repeating: 0, count: UUID128.textLength)
        buffer.withUnsafeMutableBufferPointer { value.writeText(to: $0, uppercase: true) }
        #expect(String(decoding: buffer, as: UTF8.self) == "01234567-89AB-CDEF-FEDC-BA9876543210")
        #expect(value.text == "01234567-89ab-cdef-fedc-ba9876543210")
    }
}
