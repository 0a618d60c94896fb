import RegistryCore
import Testing

@testable import RegistryWire

/// Snapshot records written in place (``SnapshotCodec/write(_:to:)``), as a forked snapshot's
/// child writes them into its blocks: exactly ``SnapshotCodec/encodedSize(of:)`` bytes, no byte
/// past them, and read back by ``SnapshotCodec/decodeRecord(_:)`` as the record written.
struct SnapshotRecordWritingTests {
    /// One record of every kind, some of them random, from `seed`.
    func records(seed: UInt64) throws -> [SnapshotRecord] {
        var random = SplitMix64(seed: seed)
        let uuid = { (random: inout SplitMix64) in UUID128(high: random.next(), low: random.next()) }
        let time = { (random: inout SplitMix64) in HLCTimestamp(millis: random.next() % (1 << 40), counter: UInt16(truncatingIfNeeded: random.next())) }
        let number = { (random: inout SplitMix64) in UInt32(truncatingIfNeeded: random.next()) }
        // Multi-byte UTF-8: a string's length field counts bytes, not characters.
        let accents = String(repeating: "é", count: Int(random.next() % 40))
        return [
            .origin(NodeID(trusted: "node-\(random.next() % 100)")),
            .vendor(Vendor(trusted: "com.vendor\(random.next() % 9)")),
            .bundle(try BundleID(parsing: "com.vendor.app\(random.next() % 9)")),
            .device(id: DeviceID(uuid(&random)), created: time(&random), origin: number(&random), vendor: number(&random)),
            .alias(number(&random), of: number(&random)),
            .claim(vendor: number(&random), identifier: Identifier(kind: .idfv, value: uuid(&random)), owner: number(&random)),
            .claim(vendor: number(&random), identifier: Identifier(kind: .keychain, value: uuid(&random)), owner: number(&random)),
            .app(device: number(&random), bundle: number(&random), first: time(&random), last: time(&random)),
            .member(NodeID(trusted: "node-b"), Member(address: "host\(accents):\(random.next() % 65536)", addressAt: time(&random), removed: random.next() % 2 == 0)),
            .binding(kind: .bind, vendor: number(&random), account: uuid(&random), device: DeviceID(uuid(&random)), time: time(&random), origin: number(&random)),
            .tombstone(DeviceID(uuid(&random))),
            .laterIDFV(device: number(&random), claim: uuid(&random), appeared: time(&random)),
            .clone(try CloneCodecTests.randomClone(&random)),
            .vendorRule(try ForgetAndVendorRuleCodecTests.randomChange(&random)),
        ]
    }

    @Test func aRecordWrittenInPlaceTakesItsSizeExactlyAndReadsBack() throws {
        for seed in 0..<50 as Range<UInt64> {
            for record in try records(seed: seed) {
                let size = SnapshotCodec.encodedSize(of: record)
                // Guard bytes on both sides: nothing is written outside the record's bytes.
                var buffer = [UInt8](repeating: 0xA5, count: size + 32)
                buffer.withUnsafeMutableBytes { SnapshotCodec.write(record, to: $0.baseAddress! + 16) }
                #expect(buffer.prefix(16).allSatisfy { $0 == 0xA5 } && buffer.suffix(16).allSatisfy { $0 == 0xA5 }, "\(record)")
                let written = Array(buffer[16..<(16 + size)])
                #expect(try written.withUnsafeBytes { try SnapshotCodec.decodeRecord($0) } == record)
                var encoded = [UInt8](repeating: 1, count: 3)
                SnapshotCodec.encode(record, into: &encoded)
                #expect(encoded == written)
            }
        }
    }
}
