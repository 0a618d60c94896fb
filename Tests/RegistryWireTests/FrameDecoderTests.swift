import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing
@testable import RegistryWire

@Suite struct FrameDecoderTests {
    func frame(_ payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeFrame { (buffer: inout ByteBuffer) in buffer.writeBytes(payload) }
        return buffer
    }

    @Test func decodesUnderEveryChunkingTheVerifierTries() throws {
        let payloads: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), [1, 2, 3, 4, 5]]
        var joined = ByteBuffer()
        for payload in payloads { joined.writeImmutableBuffer(frame(payload)) }
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [
                (frame([9, 9]), [ByteBuffer(bytes: [9, 9])]),
                (joined, payloads.map { ByteBuffer(bytes: $0) }),
            ],
            decoderFactory: { FrameDecoder(maxFrameBytes: 1024) })
    }

    @Test func refusesAnOversizedLengthBeforeThePayloadArrives() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maxFrameBytes: 16)))
        var prefix = ByteBuffer()
        prefix.writeInteger(UInt32(17))
        #expect(throws: FrameError.tooLarge(length: 17, limit: 16)) {
            try channel.writeInbound(prefix)
        }
        _ = try? channel.finish()
    }

    @Test func acceptsAFrameOfExactlyTheLimit() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maxFrameBytes: 16)))
        try channel.writeInbound(frame(Array(repeating: 1, count: 16)))
        #expect(try channel.readInbound(as: ByteBuffer.self) == ByteBuffer(bytes: Array(repeating: 1, count: 16)))
        #expect(try channel.finish().isClean)
    }

    @Test func aStreamEndingInsideAFrameIsTruncated() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(FrameDecoder(maxFrameBytes: 1024)))
        var partial = frame([1, 2, 3, 4, 5, 6])
        partial.moveWriterIndex(to: partial.writerIndex - 2)
        try channel.writeInbound(partial)
        #expect(throws: FrameError.truncated(bufferedBytes: 8)) {
            _ = try channel.finish()
        }
    }

    @Test func writeFrameBackfillsTheLength() throws {
        let buffer = frame([0xAB, 0xCD, 0xEF])
        #expect(Array(buffer.readableBytesView) == [0, 0, 0, 3, 0xAB, 0xCD, 0xEF])
    }
}
