import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``RegisterResultsWriter`` against protobuf-c, the oracle: `ServerFrame.encode(into:)`, which
/// writes registration answers directly, gives byte for byte what
/// `encodeThroughProtobufC(into:)` packs for the same frame.
@Suite struct RegisterResultsWriterTests {
    func direct(_ frame: ServerFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    func packed(_ frame: ServerFrame) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encodeThroughProtobufC(into: &buffer)
        return buffer
    }

    func pick<T>(_ choices: [T], _ random: inout SplitMix64) -> T { choices[Int(random.next() % UInt64(choices.count))] }

    func randomResult(_ random: inout SplitMix64) -> RegisterResult {
        let uuid = { (random: inout SplitMix64) in UUIDText(uuid: UUID128(high: random.next(), low: random.next())) }
        return RegisterResult(
            deviceIDText: pick([uuid(&random), UUIDText(""), UUIDText("not a uuid, longer than one")], &random),
            created: random.next() % 2 == 0, vendor: pick(["com.vendor", "", "com.a-much-longer-vendor-name.example"], &random),
            replacedDeviceIDs: (0..<random.next() % 3).map { _ in pick(["", "b7f0c1de-0000-4000-8000-000000000001", "x"], &random) },
            rejectedIdentifiers: (0..<random.next() % 3).map { _ in
                PresentedIdentifier(rawKind: pick([0, 1, 2, 9, 300, -1, .min], &random), value: pick([UUIDText(""), uuid(&random), UUIDText("zz")], &random))
            })
    }

    func randomToken(_ random: inout SplitMix64) -> CausalToken {
        let edges: [UInt64] = [1, 127, 128, 16_384, .max]
        return CausalToken(positions: (0..<random.next() % 4).map { index in
            LogPosition(origin: pick(["", "n", "node-with-a-longer-name"], &random) + "\(index)", epoch: pick([0] + edges, &random), sequence: pick(edges, &random))
        })
    }

    /// Single answers and batches, with every field at its edges: empty text (left out), unknown
    /// and negative kinds (ten-byte varints), errors with and without messages, tokens or none,
    /// request IDs of every varint length, and empty batches.
    @Test func framesAreTheOnesProtobufCPacks() throws {
        var random = SplitMix64(seed: 91)
        let requestIDs: [UInt64] = [0, 1, 127, 128, 16_383, 16_384, .max]
        for _ in 0..<400 {
            let token = random.next() % 3 == 0 ? CausalToken.empty : randomToken(&random)
            let single = ServerFrame(requestID: pick(requestIDs, &random), body: .registerResult(randomResult(&random)), token: token)
            #expect(try direct(single) == packed(single))
            let items: [BatchItem] = (0..<random.next() % 5).map { _ in
                random.next() % 4 == 0
                    ? .error(WireError(code: ErrorCode(rawValue: pick([0, 1, 7, 300, -2], &random)), message: pick(["", "refused", "a longer reason"], &random), retryable: random.next() % 2 == 0))
                    : .result(randomResult(&random))
            }
            let batch = ServerFrame(requestID: pick(requestIDs, &random), body: .registerBatchResult(items), token: token)
            #expect(try direct(batch) == packed(batch))
        }
    }

    /// Text with a NUL, which protobuf-c cannot carry, is left to protobuf-c, which refuses it,
    /// with the buffer as it was; other bodies are not written here.
    @Test func textWithANULIsRefusedAsProtobufCRefusesIt() throws {
        let frames = [
            ServerFrame(requestID: 1, body: .registerResult(RegisterResult(deviceID: "a", created: true, vendor: "com.v\u{0}x"))),
            ServerFrame(requestID: 1, body: .registerBatchResult([.error(WireError(code: ErrorCode(rawValue: 1), message: "a\u{0}b"))])),
            ServerFrame(
                requestID: 1, body: .registerResult(RegisterResult(deviceID: "a", created: false, vendor: "com.v")),
                token: CausalToken(positions: [LogPosition(origin: "n\u{0}", epoch: 1, sequence: 1)])),
        ]
        for frame in frames {
            var buffer = ByteBuffer(bytes: [9])
            #expect(!RegisterResultsWriter.write(requestID: frame.requestID, body: frame.body, token: frame.token, into: &buffer))
            #expect(buffer == ByteBuffer(bytes: [9]))
            #expect(throws: CodecError.self) { try direct(frame) }
        }
        var buffer = ByteBuffer()
        #expect(!RegisterResultsWriter.write(requestID: 1, body: .error(WireError(code: ErrorCode(rawValue: 1), message: "m")), token: .empty, into: &buffer))
        #expect(buffer.readableBytes == 0)
    }
}
