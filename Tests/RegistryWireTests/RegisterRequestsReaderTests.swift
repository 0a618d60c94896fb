import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``RegisterRequestsReader`` against protobuf-c, the oracle: frames protobuf-c packed are read,
/// and read as protobuf-c reads them; a mutated frame it reads at all, it reads as protobuf-c
/// does (what it leaves, protobuf-c decides).
@Suite struct RegisterRequestsReaderTests {
    let texts = WatchEventWriterTests()

    func randomRequest(_ random: inout SplitMix64) -> RegisterRequest {
        let kinds: [Int32] = [0, 1, 2, 3, 99, -1]
        return RegisterRequest(
            bundleID: texts.randomText(&random),
            identifiers: (0..<random.next() % 4).map { _ in
                PresentedIdentifier(rawKind: kinds[Int(random.next() % UInt64(kinds.count))], text: texts.randomText(&random))
            })
    }

    func randomFrame(_ random: inout SplitMix64) -> ClientFrame {
        let body: ClientBody =
            random.next() % 3 == 0
            ? .register(randomRequest(&random)) : .registerBatch((0..<random.next() % 5).map { _ in randomRequest(&random) })
        return ClientFrame(requestID: random.next() % 2 == 0 ? 0 : random.next() >> 30, body: body)
    }

    func encoded(_ frame: ClientFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    func readDirectly(_ bytes: ByteBuffer) -> ClientFrame? {
        bytes.withUnsafeReadableBytes { RegisterRequestsReader.frame($0) }
    }

    @Test func framesProtobufCPackedReadAsProtobufCReadsThem() throws {
        var random = SplitMix64(seed: 44)
        for _ in 0..<1_000 {
            let frame = randomFrame(&random)
            let bytes = try encoded(frame)
            let read = try #require(readDirectly(bytes))
            #expect(read == (try ClientFrame.decodedByProtobufC(bytes)))
            #expect(read == frame)
        }
    }

    @Test func otherFramesAndWriteConcernsAreLeftToProtobufC() throws {
        let request = RegisterRequest(bundleID: "com.vendor.app", keychain: "00000000-0000-0000-0000-000000000001")
        for frame in [
            ClientFrame(requestID: 1, body: .stats),
            ClientFrame(requestID: 2, body: .resolve(deviceID: "x")),
            ClientFrame(requestID: 3, body: .register(request), ackReplicas: 2),
        ] {
            #expect(readDirectly(try encoded(frame)) == nil)
        }
        #expect(readDirectly(ByteBuffer()) == nil)
    }

    @Test func aMutatedFrameItReadsItReadsAsProtobufCDoes() throws {
        var random = SplitMix64(seed: 45)
        var readByBoth = 0
        var leftToProtobufC = 0
        for _ in 0..<4_000 {
            var bytes = Array(try encoded(randomFrame(&random)).readableBytesView)
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
            if let read = readDirectly(buffer) {
                readByBoth += 1
                #expect(read == (try? ClientFrame.decodedByProtobufC(buffer)), "\(bytes)")
            } else {
                leftToProtobufC += 1
            }
        }
        // Both kinds happen, or the comparison above would say little.
        #expect(readByBoth > 200 && leftToProtobufC > 200, "\(readByBoth) read, \(leftToProtobufC) left")
    }
}
