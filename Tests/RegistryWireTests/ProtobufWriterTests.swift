import RegistryCore
import Testing
@testable import RegistryWire

/// ``ProtobufWriter``: each write takes exactly the bytes its `size` function says, with the
/// encodings protobuf's specification gives.
@Suite struct ProtobufWriterTests {
    /// Writes with `body` into a generous buffer and returns the bytes written.
    private func written(_ body: (inout ProtobufWriter) -> Void) -> [UInt8] {
        var buffer = [UInt8](repeating: 0xEE, count: 64)
        let count = buffer.withUnsafeMutableBufferPointer { raw in
            var writer = ProtobufWriter(at: raw.baseAddress!)
            body(&writer)
            return writer.cursor - raw.baseAddress!
        }
        return Array(buffer.prefix(count))
    }

    static let varints: [(UInt64, [UInt8])] = [
        (0, [0x00]), (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01]), (300, [0xAC, 0x02]),
        (16_383, [0xFF, 0x7F]), (16_384, [0x80, 0x80, 0x01]),
        (.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
    ]

    @Test(arguments: varints)
    func varintsTakeTheBytesTheirSizeSays(_ value: UInt64, _ expected: [UInt8]) {
        #expect(written { $0.varint(value) } == expected)
        #expect(ProtobufWriter.varintSize(value) == expected.count)
    }

    @Test func defaultsAreLeftOutAndTheirSizeIsZero() {
        #expect(written { $0.uint64(5, 0) }.isEmpty)
        #expect(ProtobufWriter.uint64Size(5, 0) == 0)
        #expect(written { $0.int32(1, 0) }.isEmpty)
        #expect(written { $0.string(2, "") }.isEmpty)
        #expect(ProtobufWriter.stringSize(2, "") == 0)
    }

    @Test func fieldsCarryTheirTagAndLength() {
        // Field 5 as a varint: tag (5 << 3 | 0) = 0x28.
        #expect(written { $0.uint64(5, 150) } == [0x28, 0x96, 0x01])
        #expect(ProtobufWriter.uint64Size(5, 150) == 3)
        // A negative enum or int32 is sign-extended to ten bytes.
        #expect(written { $0.int32(1, -1) }.count == ProtobufWriter.int32Size(1, -1))
        #expect(ProtobufWriter.int32Size(1, -1) == 11)
        // Field 2 as length-delimited: tag 0x12, then the UTF-8 bytes' count.
        #expect(written { $0.string(2, "é✓") } == [0x12, 0x05, 0xC3, 0xA9, 0xE2, 0x9C, 0x93])
        #expect(ProtobufWriter.stringSize(2, "é✓") == 7)
        let uuid = UUID128(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)
        #expect(written { $0.uuid(1, uuid) } == [0x0A, 0x10] + Array(1...16))
        #expect(ProtobufWriter.uuidSize(1) == 18)
        // A field number of 16 or more takes a two-byte tag.
        #expect(ProtobufWriter.tagSize(16) == 2)
        #expect(written { $0.header(16, length: 0) } == [0x82, 0x01, 0x00])
    }
}
