import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``WatchEventWriter`` against protobuf-c: over seeded random events, with empty and filled
/// fields, the bytes it writes are the ones protobuf-c packs, and protobuf-c reads them back.
@Suite struct WatchEventWriterTests {
    /// `event` packed by protobuf-c: the oracle.
    func packedByProtobufC(_ event: WatchEventMessage) throws -> ByteBuffer {
        let arena = CArena()
        let message = WatchCodec.event(event, in: arena)
        var buffer = ByteBuffer()
        try withExtendedLifetime(arena) { try ProtobufC.pack(message, into: &buffer) }
        return buffer
    }

    func randomText(_ random: inout SplitMix64) -> String {
        switch random.next() % 4 {
        case 0: return ""
        case 1: return UUID128(high: random.next(), low: random.next()).text
        case 2: return "com.vendor-\(random.next() % 1000)-é✓"
        default: return String(repeating: "x", count: Int(random.next() % 300))
        }
    }

    func randomEvent(_ random: inout SplitMix64) -> WatchEventMessage {
        let kinds: [Int32] = [0, 1, 2, 3, 4, 5, 6, 7, 99, -1]
        let reasons: [UnboundDeviceMessage.Reason] = [.unspecified, .unbound, .replaced, .refused]
        return WatchEventMessage(
            kind: kinds[Int(random.next() % UInt64(kinds.count))],
            operation: LogPosition(origin: randomText(&random), epoch: random.next() % 3 == 0 ? 0 : random.next(), sequence: random.next() >> (random.next() % 64)),
            hlc: random.next() % 3 == 0 ? 0 : random.next(), vendor: randomText(&random), deviceID: randomText(&random),
            otherDeviceIDs: (0..<random.next() % 4).map { _ in randomText(&random) }, accountID: randomText(&random),
            unbindReason: reasons[Int(random.next() % 4)], boundDeviceIDs: (0..<random.next() % 4).map { _ in randomText(&random) })
    }

    @Test func itWritesTheBytesProtobufCPacks() throws {
        var random = SplitMix64(seed: 41)
        for _ in 0..<2_000 {
            let event = randomEvent(&random)
            let expected = try packedByProtobufC(event)
            var field = ByteBuffer()
            try WatchFrames.appendEventField(event, to: &field)
            // The field is the key of WatchEvents.events (field 1, length-delimited), the length, the event.
            #expect(field.readInteger(as: UInt8.self) == 0x0A)
            var length: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = field.readInteger(as: UInt8.self) {
                length |= UInt64(byte & 0x7F) << shift
                shift += 7
                if byte < 0x80 { break }
            }
            #expect(Int(length) == field.readableBytes)
            #expect(field == expected, "\(event)")
        }
    }
}
