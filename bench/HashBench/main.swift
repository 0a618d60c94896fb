// The cost of keeping identifiers as keyed hashes: nanoseconds per identifier for
// IdentifierKey.seal (HMAC-SHA256 through swift-crypto, the node's code), against a baseline
// measured in the same run, SipHash-2-4-128 of the same 17 bytes (the keyed hash the registry
// already uses to mint device IDs). A registration presents up to two identifiers.
// Run by bench/security.sh; prints one JSON object.
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

var hmacRuns = [Double](), sipRuns = [Double]()
for _ in 0..<5 {
    hmacRuns.append(measure { key.seal($0).value.low })
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
let hmac = hmacRuns.sorted()[2], sip = sipRuns.sorted()[2]
print("{\"hmac_ns_per_identifier\": \(hmac), \"siphash_ns_per_identifier\": \(sip), \"identifiers\": \(count), \"runs\": 5}")
