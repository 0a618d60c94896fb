// The cost of keeping identifiers as keyed hashes: nanoseconds per identifier for
// IdentifierKey.seal (HMAC-SHA256 with both pads' states kept: two runs of SHA-256's block
// function, the node's code), against, in the same run:
// - the same HMAC through swift-crypto's HMAC<SHA256> (what seal did before);
// - the floor: SHA-256's block function on two fixed blocks in one call, nothing else;
// - SipHash-2-4-128 of the same 17 bytes (the keyed hash the registry uses to mint device IDs).
// A registration presents up to two identifiers. Run by bench/security.sh; prints one JSON object.
import CSHA256Blocks
import Dispatch
import RegistryCore
import RegistryServer

let count = 2_000_000
var generator = SplitMix64(seed: 17)
let identifiers = (0..<1_024).map { index in
    Identifier(kind: index % 2 == 0 ? .idfv : .keychain, value: UUID128(high: generator.next(), low: generator.next() | 1))
}
let key = IdentifierKey(secret: "bench secret")

func measure(_ body: (Identifier) -> UInt64) -> Double {
    var sink: UInt64 = 0
    for identifier in identifiers { sink &+= body(identifier) }  // warm-up
    let start = DispatchTime.now().uptimeNanoseconds
    for index in 0..<count { sink &+= body(identifiers[index & 1_023]) }
    let elapsed = DispatchTime.now().uptimeNanoseconds - start
    if sink == 42 { print("") }  // keeps the work
    return Double(elapsed) / Double(count)
}

// The floor's state and its two blocks, allocated once.
let floorState = UnsafeMutablePointer<UInt32>.allocate(capacity: 8)
floorState.initialize(repeating: 1, count: 8)
let floorBlocks = UnsafeMutablePointer<UInt8>.allocate(capacity: 128)
floorBlocks.initialize(repeating: 0x5A, count: 128)
var hmacRuns = [Double](), swiftCryptoRuns = [Double](), floorRuns = [Double](), sipRuns = [Double]()
for _ in 0..<5 {
    hmacRuns.append(measure { key.seal($0).value.low })
    swiftCryptoRuns.append(measure { key.sealWithSwiftCrypto($0).value.low })
    floorRuns.append(
        measure { identifier in
            floorState[0] = UInt32(truncatingIfNeeded: identifier.value.low)
            CCryptoBoringSSL_SHA256_TransformBlocks(floorState, floorBlocks, 2)
            return UInt64(floorState[0])
        })
    sipRuns.append(
        measure { identifier in
            var hasher = SipHash128(k0: 0x0123_4567_89AB_CDEF, k1: 0xFEDC_BA98_7654_3210)
            hasher.combine(UInt8(truncatingIfNeeded: identifier.kind.rawValue))
            for word in [identifier.value.high, identifier.value.low] {
                for shift in stride(from: UInt64(56), through: 0, by: -8) { hasher.combine(UInt8(truncatingIfNeeded: word >> shift)) }
            }
            return hasher.finalize().first
        })
}
let hmac = hmacRuns.sorted()[2], swiftCrypto = swiftCryptoRuns.sorted()[2], floor = floorRuns.sorted()[2], sip = sipRuns.sorted()[2]
print(
    "{\"hmac_ns_per_identifier\": \(hmac), \"swift_crypto_hmac_ns_per_identifier\": \(swiftCrypto), "
        + "\"two_sha256_blocks_ns\": \(floor), \"siphash_ns_per_identifier\": \(sip), \"identifiers\": \(count), \"runs\": 5}")
