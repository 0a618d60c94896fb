import CSHA256Blocks

/// HMAC-SHA256 of one 17-byte message (an identifier's kind byte and its 16 bytes) under a key
/// of at most 64 bytes, with SHA-256's states after the key's inner and outer pads computed once
/// (RFC 2104: HMAC(K, m) = H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ m))). Each identifier then costs two
/// runs of SHA-256's block function (BoringSSL's, through swift-crypto) on the stack: one for the
/// inner hash's last block, one for the outer's. The same bytes as swift-crypto's
/// `HMAC<SHA256>` (`IdentifierKeyTests` compares them), without its copy of the hasher's
/// heap-allocated context for every message.
struct IdentifierHMAC: Sendable {
    /// SHA-256's state after the block K ⊕ ipad, and after K ⊕ opad.
    private let inner: SIMD8<UInt32>
    private let outer: SIMD8<UInt32>

    /// SHA-256's initial state (FIPS 180-4, 5.3.3).
    private static let initial = SIMD8<UInt32>(
        0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A, 0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19)

    init(key: [UInt8]) {
        precondition(key.count <= 64, "a key longer than SHA-256's block is hashed first; this key type takes none")
        var padded = key + [UInt8](repeating: 0, count: 64 - key.count)
        inner = Self.compress(Self.initial, padded.map { $0 ^ 0x36 })
        padded = padded.map { $0 ^ 0x5C }
        outer = Self.compress(Self.initial, padded)
    }

    /// The first 16 bytes of HMAC(key, kind ‖ value's 16 bytes), as two big-endian words.
    func mac(kind: UInt8, value: UUID128Words) -> (high: UInt64, low: UInt64) {
        // The inner hash's last block: 64 key-pad bytes came before, so the length is 81 bytes.
        var block = InlineBlock()
        block.setByte(0, kind)
        block.setBigEndian(value.high, at: 1)
        block.setBigEndian(value.low, at: 9)
        block.setByte(17, 0x80)
        block.setBigEndian(UInt64(64 + 17) * 8, at: 56)
        let innerHash = block.compress(inner)
        // The outer hash's last block: the 32-byte inner hash after the other key pad: 96 bytes.
        var second = InlineBlock()
        for index in 0..<8 { second.setBigEndian(innerHash[index], at: 4 * index) }
        second.setByte(32, 0x80)
        second.setBigEndian(UInt64(64 + 32) * 8, at: 56)
        let result = second.compress(outer)
        return (UInt64(result[0]) << 32 | UInt64(result[1]), UInt64(result[2]) << 32 | UInt64(result[3]))
    }

    private static func compress(_ state: SIMD8<UInt32>, _ block: [UInt8]) -> SIMD8<UInt32> {
        var words = [state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7]]
        block.withUnsafeBufferPointer { CCryptoBoringSSL_SHA256_TransformBlocks(&words, $0.baseAddress, 1) }
        return SIMD8(words[0], words[1], words[2], words[3], words[4], words[5], words[6], words[7])
    }
}

/// An identifier's 16 bytes as two words, high first.
typealias UUID128Words = (high: UInt64, low: UInt64)

/// One 64-byte block on the stack, zeroed, filled byte by byte or a big-endian word at a time.
private struct InlineBlock {
    private var bytes: (SIMD32<UInt8>, SIMD32<UInt8>) = (.zero, .zero)

    mutating func setByte(_ index: Int, _ value: UInt8) {
        withUnsafeMutableBytes(of: &bytes) { $0[index] = value }
    }

    mutating func setBigEndian<Word: FixedWidthInteger>(_ value: Word, at offset: Int) {
        withUnsafeMutableBytes(of: &bytes) { $0.storeBytes(of: value.bigEndian, toByteOffset: offset, as: Word.self) }
    }

    /// SHA-256's block function on this block from `state`.
    func compress(_ state: SIMD8<UInt32>) -> SIMD8<UInt32> {
        var state = state
        var block = bytes
        withUnsafeMutableBytes(of: &state) { words in
            withUnsafeBytes(of: &block) { data in
                CCryptoBoringSSL_SHA256_TransformBlocks(
                    words.baseAddress!.assumingMemoryBound(to: UInt32.self), data.baseAddress!.assumingMemoryBound(to: UInt8.self), 1)
            }
        }
        return state
    }
}
