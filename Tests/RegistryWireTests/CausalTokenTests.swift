import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

/// ``CausalToken`` against a model written here: a dictionary from (origin, epoch) to the
/// highest sequence, where merging is the key-wise maximum and sequence 0 requires nothing.
@Suite struct CausalTokenTests {
    struct Key: Hashable { let origin: String; let epoch: UInt64 }

    static func model(_ positions: [LogPosition]) -> [Key: UInt64] {
        var held = [Key: UInt64]()
        for position in positions where position.sequence > 0 {
            held[Key(origin: position.origin, epoch: position.epoch), default: 0] = max(
                held[Key(origin: position.origin, epoch: position.epoch)] ?? 0, position.sequence)
        }
        return held
    }

    static func model(_ token: CausalToken) -> [Key: UInt64] {
        Dictionary(uniqueKeysWithValues: token.positions.map { (Key(origin: $0.origin, epoch: $0.epoch), $0.sequence) })
    }

    static func randomPositions(_ random: inout SplitMix64) -> [LogPosition] {
        (0..<Int(random.next() % 8)).map { _ in
            LogPosition(origin: ["node-a", "node-b", "node-c"][Int(random.next() % 3)], epoch: 1 + random.next() % 3, sequence: random.next() % 5)
        }
    }

    /// Seeded: a token is its positions' model, sorted with one position per log; merging is
    /// the model's key-wise maximum, commutative and idempotent; and the bytes read back equal.
    @Test(arguments: Array(1...200) as [UInt64])
    func tokensMergeAsTheKeyWiseMaximum(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        let (left, right) = (Self.randomPositions(&random), Self.randomPositions(&random))
        let (a, b) = (CausalToken(positions: left), CausalToken(positions: right))
        #expect(Self.model(a) == Self.model(left) && a.positions.count == Self.model(left).count)
        let keys = a.positions.map { Key(origin: $0.origin, epoch: $0.epoch) }
        #expect(keys == keys.sorted { $0.origin != $1.origin ? $0.origin < $1.origin : $0.epoch < $1.epoch })
        let merged = a.merging(b)
        #expect(Self.model(merged) == Self.model(left + right))
        #expect(merged == b.merging(a) && merged.merging(a) == merged && merged == CausalToken(positions: left + right))
        #expect(try CausalToken(bytes: merged.bytes) == merged)
    }

    /// Seeded: pruning by an answer drops exactly the logs the model says every member holds as
    /// far as the token names them: named by the request, left out of a non-empty answer, and
    /// not named further by the token.
    @Test(arguments: Array(1...200) as [UInt64])
    func anAnswerPrunesTheLogsItShowsHeldEverywhere(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let (token, sent, answer) = (
            CausalToken(positions: Self.randomPositions(&random)), CausalToken(positions: Self.randomPositions(&random)),
            CausalToken(positions: Self.randomPositions(&random))
        )
        let (held, request, answered) = (Self.model(token), Self.model(sent), Self.model(answer))
        var expected = held
        if !answered.isEmpty {
            for (key, sequence) in held where answered[key] == nil && request[key].map({ sequence <= $0 }) == true { expected[key] = nil }
        }
        #expect(Self.model(token.pruned(bySent: sent, answer: answer)) == expected, "seed \(seed)")
    }

    @Test func aPeerlessNodesEmptyAnswerPrunesNothing() {
        let token = CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 3)])
        #expect(token.pruned(bySent: token, answer: .empty) == token)
        let other = CausalToken(positions: [LogPosition(origin: "node-c", epoch: 2, sequence: 1)])
        #expect(token.pruned(bySent: token, answer: other).isEmpty)
        #expect(token.pruned(bySent: CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 2)]), answer: other) == token)
    }

    @Test func anEmptyTokenIsNoBytesAndRequiresNothing() throws {
        #expect(CausalToken.empty.bytes.isEmpty && CausalToken.empty.isEmpty)
        #expect(try CausalToken(bytes: []) == .empty)
        #expect(CausalToken(positions: [LogPosition(origin: "node-a", epoch: 1, sequence: 0)]).isEmpty)
    }

    /// Bytes that are not a token, and a token naming more logs than any node accepts, are
    /// typed errors.
    @Test func badBytesAreTypedErrors() {
        #expect(throws: CodecError.self) { try CausalToken(bytes: [0x0A, 0x05, 0x01]) }
        let many = CausalToken(positions: (1...300).map { LogPosition(origin: "node-a", epoch: UInt64($0), sequence: 1) })
        #expect(throws: CodecError.invalidField("a causal token names 300 positions, more than 256")) { try CausalToken(bytes: many.bytes) }
    }

    /// The token travels in ClientFrame.after and ServerFrame.token, and an empty one is left
    /// out of the frame.
    @Test func framesCarryTokens() throws {
        let token = CausalToken(positions: [LogPosition(origin: "node-b", epoch: 9, sequence: 4), LogPosition(origin: "node-a", epoch: 2, sequence: 7)])
        let request = ClientFrame(requestID: 3, body: .resolve(deviceID: "x"), after: token)
        var buffer = ByteBuffer()
        try request.encode(into: &buffer)
        #expect(try ClientFrame(decoding: buffer) == request)
        let answer = ServerFrame(requestID: 3, body: .error(WireError(code: .notFound, message: "no")), token: token)
        buffer.clear()
        try answer.encode(into: &buffer)
        #expect(try ServerFrame(decoding: buffer) == answer)
        var plain = ByteBuffer()
        try ServerFrame(requestID: 3, body: .error(WireError(code: .notFound, message: "no"))).encode(into: &plain)
        #expect(plain.readableBytes < buffer.readableBytes)
        #expect(try ServerFrame(decoding: plain).token.isEmpty)
    }
}
