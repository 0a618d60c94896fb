import NIOCore
import RegistryWire
import Testing

@Suite struct FrameReaderTests {
    /// Frames of `sizes` bytes each (byte values count up), length-prefixed, in one buffer.
    func stream(_ sizes: [Int]) -> ByteBuffer {
        var buffer = ByteBuffer()
        for (index, size) in sizes.enumerated() {
            buffer.writeFrame { $0.writeBytes((0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index) }) }
        }
        return buffer
    }

    @Test func cutsFramesWhateverPiecesTheBytesArriveIn() throws {
        let sizes = [0, 1, 300, 70_000, 5]
        let whole = stream(sizes)
        for piece in [1, 3, 4, 4_096, whole.readableBytes] {
            var reader = FrameReader(maxFrameBytes: 1 << 20)
            var cut = [Int]()
            var rest = whole
            while rest.readableBytes > 0 {
                var bytes = rest.readSlice(length: min(piece, rest.readableBytes))!
                reader.append(&bytes)
                while let payload = try reader.next() { cut.append(payload.readableBytes) }
                reader.compact()
            }
            #expect(cut == sizes, "pieces of \(piece) bytes")
            #expect(reader.bufferedBytes == 0)
        }
    }

    @Test func refusesAFrameOverTheLimitFromItsPrefixAlone() {
        var reader = FrameReader(maxFrameBytes: 100)
        var prefix = ByteBuffer()
        prefix.writeInteger(UInt32(101))
        reader.append(&prefix)
        #expect(throws: FrameError.tooLarge(length: 101, limit: 100)) { try reader.next() }
    }

    @Test func finishDropsWholeFramesAndReportsAPartialOne() throws {
        var reader = FrameReader(maxFrameBytes: 1 << 20)
        var bytes = stream([10, 20])
        bytes.writeInteger(UInt32(50))
        bytes.writeBytes([1, 2, 3])
        reader.append(&bytes)
        #expect(reader.finish() == 7, "the prefix and three bytes of the unfinished frame")
        #expect(reader.bufferedBytes == 0)
    }

    @Test func handsOverWhatItHasNotCutAndStartsFromWhatItIsHanded() throws {
        var first = FrameReader(maxFrameBytes: 1 << 20)
        var bytes = stream([4, 6])
        first.append(&bytes)
        #expect(try first.next()?.readableBytes == 4)
        var second = FrameReader(maxFrameBytes: 1 << 20, alreadyRead: first.takeRest())
        #expect(first.bufferedBytes == 0)
        #expect(try second.next()?.readableBytes == 6)
        #expect(try second.next() == nil)
    }
}
