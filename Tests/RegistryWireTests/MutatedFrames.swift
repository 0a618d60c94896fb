import NIOCore
import RegistryCore
import Testing

/// A frame reader of its own held to protobuf-c over seeded mutations of frames protobuf-c
/// packed: a flipped bit, a replaced byte, a cut end, an inserted or removed byte, one to four of
/// them. A mutated frame the reader reads at all must read as protobuf-c reads it; what it
/// leaves, protobuf-c decides.
enum MutatedFrames {
    /// Compares `direct` with `protobufC` over `count` mutations of frames `frame` makes.
    static func expectAgreement<Frame: Equatable>(
        seed: UInt64, count: Int = 4_000, frame: (inout SplitMix64) throws -> ByteBuffer,
        direct: (ByteBuffer) -> Frame?, protobufC: (ByteBuffer) throws -> Frame
    ) throws {
        var random = SplitMix64(seed: seed)
        var readByBoth = 0
        var leftToProtobufC = 0
        for _ in 0..<count {
            var bytes = Array(try frame(&random).readableBytesView)
            guard !bytes.isEmpty else { continue }
            for _ in 0...(random.next() % 3) {
                let at = Int(random.next() % UInt64(bytes.count))
                switch random.next() % 5 {
                case 0: bytes[at] ^= UInt8(1 << (random.next() % 8))
                case 1: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                case 2: bytes.removeLast(Int(random.next() % UInt64(min(bytes.count, 8))))
                case 3: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: at)
                default: bytes.remove(at: at)
                }
                if bytes.isEmpty { break }
            }
            let buffer = ByteBuffer(bytes: bytes)
            if let read = direct(buffer) {
                readByBoth += 1
                #expect(read == (try? protobufC(buffer)), "\(bytes)")
            } else {
                leftToProtobufC += 1
            }
        }
        // Both kinds happen, or the comparison above would say little.
        #expect(readByBoth > count / 20 && leftToProtobufC > count / 20, "\(readByBoth) read, \(leftToProtobufC) left")
    }
}
