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
        try MutatedFrames.expectAgreement(
            seed: 45, frame: { try encoded(randomFrame(&$0)) }, direct: readDirectly, protobufC: { try ClientFrame.decodedByProtobufC($0) })
    }
}
