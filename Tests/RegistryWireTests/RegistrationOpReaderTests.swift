import NIOCore
import RegistryCore
import Testing

@testable import RegistryWire

/// ``RegistrationOpReader`` against protobuf-c, the oracle: registrations protobuf-c packed are
/// read, and read as protobuf-c reads them; a mutated one it reads at all, it reads as protobuf-c
/// does (what it leaves, protobuf-c decides, errors included).
@Suite struct RegistrationOpReaderTests {
    func randomOperation(_ random: inout SplitMix64) throws -> RegistrationOp {
        func pick(_ choices: [String]) -> String { choices[Int(random.next() % UInt64(choices.count))] }
        func hlc() -> HLCTimestamp { HLCTimestamp(rawValue: random.next() % 4 == 0 ? 0 : random.next() >> (random.next() % 64)) }
        func ref() -> DeviceRef {
            DeviceRef(
                id: DeviceID(UUID128(high: random.next(), low: random.next())), created: hlc(),
                origin: NodeID(trusted: pick(["node-a", "node-d31c2f65", "n", "b-0"])), vendor: Vendor(trusted: pick(["com.load7", "org.é✓", "x"])))
        }
        return RegistrationOp(
            device: ref(), bundle: try BundleID(parsing: pick(["com.load7.app1", "com.load7.app2", "org.example.a-b"])),
            claims: IdentifierList((0..<random.next() % 3).map { _ in
                Identifier(kind: IdentifierKind.allCases[Int(random.next() % 2)], value: UUID128(high: random.next() | 1, low: random.next()))
            }),
            merged: (0..<random.next() % 3).map { _ in ref() }, seen: hlc())
    }

    func packed(_ random: inout SplitMix64) throws -> ByteBuffer {
        ByteBuffer(bytes: try CodecRoundTripTests.packedByProtobufC(try randomOperation(&random)))
    }

    func readDirectly(_ bytes: ByteBuffer) -> Operation? {
        bytes.withUnsafeReadableBytes { RegistrationOpReader.operation($0) }
    }

    @Test func registrationsProtobufCPackedReadAsProtobufCReadsThem() throws {
        var random = SplitMix64(seed: 46)
        for _ in 0..<1_000 {
            let op = try randomOperation(&random)
            let bytes = ByteBuffer(bytes: try CodecRoundTripTests.packedByProtobufC(op))
            let read = try #require(readDirectly(bytes))
            #expect(read == (try OperationCodec.decodedByProtobufC(bytes)))
            #expect(read == .registration(op))
            #expect(try OperationCodec.decode(bytes) == read)
            #expect(try OperationCodec.decode(Array(bytes.readableBytesView)) == read)
        }
    }

    @Test func otherOperationsAndRefusedValuesAreLeftToProtobufC() throws {
        let other: [Operation] = [
            .forget(ForgetOp(device: DeviceID(UUID128(high: 1, low: 2)), vendor: Vendor(trusted: "com.load7"))),
            .membership(MembershipOp(node: try NodeID("node-a"), address: "127.0.0.1:7000", removed: false, at: HLCTimestamp(rawValue: 5))),
        ]
        for operation in other {
            let bytes = ByteBuffer(bytes: OperationCodec.encode(operation))
            #expect(readDirectly(bytes) == nil)
            #expect(try OperationCodec.decode(bytes) == operation)
            #expect(try OperationCodec.decode(Array(bytes.readableBytesView)) == operation)
        }
        // An origin protobuf-c's path refuses (upper case), and a registration without a device:
        // left, and the codec's error is protobuf-c's path's.
        var random = SplitMix64(seed: 47)
        let valid = try randomOperation(&random)
        let op = RegistrationOp(
            device: DeviceRef(id: valid.device.id, created: valid.device.created, origin: NodeID(trusted: "Node-A"), vendor: valid.device.vendor),
            bundle: valid.bundle, claims: valid.claims, merged: valid.merged, seen: valid.seen)
        let refused = ByteBuffer(bytes: try CodecRoundTripTests.packedByProtobufC(op))
        #expect(readDirectly(refused) == nil)
        #expect(throws: CodecError.self) { try OperationCodec.decode(refused) }
        #expect(throws: CodecError.self) { try OperationCodec.decode(Array(refused.readableBytesView)) }
        #expect(readDirectly(ByteBuffer(bytes: [0x0A, 0x00])) == nil)
        #expect(readDirectly(ByteBuffer()) == nil)
    }

    @Test func aMutatedRegistrationItReadsItReadsAsProtobufCDoes() throws {
        try MutatedFrames.expectAgreement(
            seed: 48, frame: { try packed(&$0) }, direct: readDirectly, protobufC: { try OperationCodec.decodedByProtobufC($0) })
    }
}
