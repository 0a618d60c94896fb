import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``WatchEventsReader`` against protobuf-c, the oracle: frames protobuf-c packed are read, and
/// read as protobuf-c reads them; a mutated frame it reads at all, it reads as protobuf-c does
/// (what it leaves, protobuf-c decides).
@Suite struct WatchEventsReaderTests {
    let writer = WatchEventWriterTests()

    func randomFrame(_ random: inout SplitMix64) -> ServerFrame {
        let events = (0..<random.next() % 6).map { _ in writer.randomEvent(&random) }
        let cursor =
            random.next() % 3 == 0
            ? nil
            : WatchCursor(
                clusterID: writer.randomText(&random),
                positions: (0..<random.next() % 3).map { _ in
                    LogPosition(origin: writer.randomText(&random), epoch: random.next() % 9, sequence: random.next() >> 20)
                })
        return ServerFrame(requestID: random.next() % 2 == 0 ? 0 : random.next() >> 30, body: .watchEvents(WatchEventsMessage(events: events, cursor: cursor)))
    }

    func encoded(_ frame: ServerFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    func readDirectly(_ bytes: ByteBuffer) -> ServerFrame? {
        bytes.withUnsafeReadableBytes { WatchEventsReader.frame($0) }
    }

    @Test func framesProtobufCPackedReadAsProtobufCReadsThem() throws {
        var random = SplitMix64(seed: 42)
        for _ in 0..<1_000 {
            let frame = randomFrame(&random)
            let bytes = try encoded(frame)
            let read = try #require(readDirectly(bytes))
            #expect(read == (try ServerFrame.decodedByProtobufC(bytes)))
            #expect(read == frame)
        }
    }

    @Test func fieldsTheSchemaDoesNotHaveAreSkipped() throws {
        let event = WatchEventMessage(
            kind: 1, operation: LogPosition(origin: "node-a", epoch: 1, sequence: 7), hlc: 9, vendor: "com.vendor",
            deviceID: "00000000-0000-0000-0000-000000000001")
        var field = ByteBuffer()
        try WatchFrames.appendEventField(event, to: &field)
        // The event again, with fields 10 (varint), 11 (fixed64), 12 (bytes) and 13 (fixed32) after its own.
        var newer = ByteBuffer()
        let extra: [UInt8] = [10 << 3, 5, 11 << 3 | 1] + Array(repeating: 1, count: 8) + [12 << 3 | 2, 2, 0xAA, 0xBB, 13 << 3 | 5, 1, 2, 3, 4]
        var body = field
        body.moveReaderIndex(forwardBy: 2)  // the key and the one-byte length
        newer.writeBytes([0x0A, UInt8(body.readableBytes + extra.count)])
        newer.writeImmutableBuffer(body)
        newer.writeBytes(extra)
        var frame = ByteBuffer()
        WatchFrames.write(requestID: 3, eventFields: [newer], cursorField: nil, into: &frame)
        frame.moveReaderIndex(forwardBy: 4)
        let read = try #require(readDirectly(frame))
        #expect(read == ServerFrame(requestID: 3, body: .watchEvents(WatchEventsMessage(events: [event], cursor: nil))))
        #expect(read == (try ServerFrame.decodedByProtobufC(frame)))
    }

    @Test func otherFramesAreLeftToProtobufC() throws {
        for frame in [
            ServerFrame(requestID: 1, body: .error(WireError(code: .invalidArgument, message: "no"))),
            ServerFrame(requestID: 2, body: .stats(StatsMessage())),
        ] {
            #expect(readDirectly(try encoded(frame)) == nil)
        }
        #expect(readDirectly(ByteBuffer()) == nil)
    }

    @Test func aMutatedFrameItReadsItReadsAsProtobufCDoes() throws {
        try MutatedFrames.expectAgreement(
            seed: 43, frame: { try encoded(randomFrame(&$0)) }, direct: readDirectly, protobufC: { try ServerFrame.decodedByProtobufC($0) })
    }
}
