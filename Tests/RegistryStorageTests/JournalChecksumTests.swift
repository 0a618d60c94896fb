import RegistryCore
import Testing
@testable import RegistryStorage

/// The striped checksum against an oracle written apart from it (its words dealt to the lanes by
/// index, not by stripe), and the changes it must notice.
@Suite struct JournalChecksumTests {
    /// The same rule as ``JournalChecksum/striped(_:seed:)``, written from its description: the
    /// words of whole 32-byte stripes go to lane (word index mod 4), each lane a chain of the mix
    /// from its own start; the lanes fold as documented; the words left, the tail bytes and the
    /// length as in the single chain.
    func oracle(_ bytes: [UInt8], seed: UInt64) -> UInt64 {
        func mix(_ value: UInt64) -> UInt64 {
            var x = value &* 0x9E37_79B9_7F4A_7C15
            x ^= x >> 32
            x = x &* 0xBF58_476D_1CE4_E5B9
            return x ^ (x >> 29)
        }
        func word(_ index: Int) -> UInt64 {
            (0..<8).reduce(0) { $0 | UInt64(bytes[index * 8 + $1]) << (8 * UInt64($1)) }
        }
        let first = mix(0x6A09_E667_F3BC_C908 ^ seed)
        var lanes = [first, first ^ 0x9E37_79B9_7F4A_7C15, first ^ 0xBF58_476D_1CE4_E5B9, first ^ 0x94D0_49BB_1331_11EB]
        let striped = bytes.count / 32 * 4
        for index in 0..<striped { lanes[index % 4] = mix(lanes[index % 4] ^ word(index)) }
        var hash = mix(mix(mix(lanes[0] ^ mix(lanes[1])) ^ lanes[2]) ^ lanes[3])
        for index in striped..<bytes.count / 8 { hash = mix(hash ^ word(index)) }
        var tail: UInt64 = 0
        for (shift, byte) in bytes[(bytes.count / 8 * 8)...].enumerated() { tail |= UInt64(byte) << (8 * UInt64(shift)) }
        return mix(mix(hash ^ tail) ^ UInt64(bytes.count))
    }

    func striped(_ bytes: [UInt8], seed: UInt64 = 3) -> UInt64 { bytes.withUnsafeBytes { JournalChecksum.striped($0, seed: seed) } }
    func serial(_ bytes: [UInt8], seed: UInt64 = 3) -> UInt64 { bytes.withUnsafeBytes { JournalChecksum.of($0, seed: seed) } }

    @Test func agreesWithTheOracleAtEveryLengthAroundTheStripes() {
        var random = SplitMix64(seed: 11)
        for length in Array(0...200) + [1_000, 4_096, 16_411] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let seed = random.next()
            #expect(striped(bytes, seed: seed) == oracle(bytes, seed: seed), "length \(length)")
        }
    }

    /// Differs from the single chain (so an entry's format is told by its checksum too), and
    /// notices every single-bit flip, two words trading places within a stripe and across
    /// stripes, zeros added at the end, and another seed.
    @Test func noticesFlipsSwapsLengthsAndSeeds() {
        var random = SplitMix64(seed: 12)
        let bytes = (0..<1_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let whole = striped(bytes)
        #expect(whole != serial(bytes))
        for bit in 0..<bytes.count * 8 {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << (bit % 8)
            #expect(striped(flipped) != whole, "bit \(bit)")
        }
        func swappingWords(_ a: Int, _ b: Int) -> [UInt8] {
            var swapped = bytes
            for offset in 0..<8 { swapped.swapAt(a * 8 + offset, b * 8 + offset) }
            return swapped
        }
        #expect(striped(swappingWords(0, 1)) != whole)  // two lanes of one stripe
        #expect(striped(swappingWords(0, 4)) != whole)  // one lane, two stripes
        #expect(striped(swappingWords(3, 6)) != whole)
        #expect(striped(bytes + [0]) != whole && striped(bytes + [UInt8](repeating: 0, count: 32)) != whole)
        #expect(striped(bytes, seed: 4) != whole)
    }
}
