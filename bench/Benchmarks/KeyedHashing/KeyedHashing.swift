// The cost of keeping identifiers as keyed hashes, per identifier, measured with ordo-one's
// package-benchmark (`swift package benchmark --target KeyedHashing`; bench/security.sh runs it
// and writes the figures to BENCHMARKS.md). Four benchmarks in one run:
// - the node's `IdentifierKey.seal`: HMAC-SHA256 with both pads' states kept, two runs of
//   SHA-256's block function (BoringSSL's, through swift-crypto);
// - the same HMAC through swift-crypto's `HMAC<SHA256>`, what `seal` did before;
// - the floor: SHA-256's block function on two fixed blocks in one call, nothing else;
// - SipHash-2-4-128 of the same 17 bytes, the keyed hash the registry mints device IDs with.
// A registration presents up to two identifiers.
import Benchmark
import CSHA256Blocks
import RegistryCore
import RegistryServer

/// 1,024 identifiers of both kinds, read in turn.
private let identifiers: [Identifier] = {
    var generator = SplitMix64(seed: 17)
    return (0..<1_024).map { index in
        Identifier(kind: index % 2 == 0 ? .idfv : .keychain, value: UUID128(high: generator.next(), low: generator.next() | 1))
    }
}()

private let key = IdentifierKey(secret: "bench secret")

/// The floor's state and its two blocks, allocated once. Only the benchmark's one thread
/// touches them.
private nonisolated(unsafe) let floorState: UnsafeMutablePointer<UInt32> = {
    let state = UnsafeMutablePointer<UInt32>.allocate(capacity: 8)
    state.initialize(repeating: 1, count: 8)
    return state
}()
private nonisolated(unsafe) let floorBlocks: UnsafeMutablePointer<UInt8> = {
    let blocks = UnsafeMutablePointer<UInt8>.allocate(capacity: 128)
    blocks.initialize(repeating: 0x5A, count: 128)
    return blocks
}()

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(3))

    Benchmark("IdentifierKey.seal") { benchmark in
        for index in benchmark.scaledIterations { blackHole(key.seal(identifiers[index & 1_023])) }
    }
    Benchmark("HMAC<SHA256> through swift-crypto") { benchmark in
        for index in benchmark.scaledIterations { blackHole(key.sealWithSwiftCrypto(identifiers[index & 1_023])) }
    }
    Benchmark("floor: two SHA-256 blocks") { benchmark in
        for index in benchmark.scaledIterations {
            floorState[0] = UInt32(truncatingIfNeeded: identifiers[index & 1_023].value.low)
            CCryptoBoringSSL_SHA256_TransformBlocks(floorState, floorBlocks, 2)
            blackHole(floorState[0])
        }
    }
    Benchmark("SipHash-2-4-128") { benchmark in
        for index in benchmark.scaledIterations {
            let identifier = identifiers[index & 1_023]
            var hasher = SipHash128(k0: 0x0123_4567_89AB_CDEF, k1: 0xFEDC_BA98_7654_3210)
            hasher.combine(UInt8(truncatingIfNeeded: identifier.kind.rawValue))
            for word in [identifier.value.high, identifier.value.low] {
                for shift in stride(from: UInt64(56), through: 0, by: -8) { hasher.combine(UInt8(truncatingIfNeeded: word >> shift)) }
            }
            blackHole(hasher.finalize().first)
        }
    }
}
