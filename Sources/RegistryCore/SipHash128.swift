/// SipHash-2-4 with its 128-bit output (Aumasson and Bernstein, 2012): a keyed pseudorandom
/// function for short inputs. The registry uses it where an output must be unpredictable to
/// whoever lacks the key, yet the same on every node that has it: minting device IDs
/// (``MintingKey``). It is checked against the reference implementation's vectors.
public struct SipHash128: Sendable {
    private var v0: UInt64, v1: UInt64, v2: UInt64, v3: UInt64
    /// Bytes not yet compressed (fewer than 8), little-endian in the low bits.
    private var tail: UInt64 = 0
    private var tailCount = 0
    private var length: UInt64 = 0

    /// A hasher keyed with (`k0`, `k1`): the key's bytes 0...7 and 8...15, little-endian.
    public init(k0: UInt64, k1: UInt64) {
        v0 = k0 ^ 0x736f_6d65_7073_6575
        v1 = k1 ^ 0x646f_7261_6e64_6f6d ^ 0xee
        v2 = k0 ^ 0x6c79_6765_6e65_7261
        v3 = k1 ^ 0x7465_6462_7974_6573
    }

    public mutating func combine(_ byte: UInt8) {
        tail |= UInt64(byte) << (8 * UInt64(tailCount))
        tailCount += 1
        length &+= 1
        if tailCount == 8 {
            compress(tail)
            tail = 0
            tailCount = 0
        }
    }

    /// `bytes` in order: a word at a time where they are contiguous (as a raw buffer), else
    /// one by one.
    public mutating func combine<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if bytes.withContiguousStorageIfAvailable({ combine(UnsafeRawBufferPointer($0)) }) != nil { return }
        for byte in bytes { combine(byte) }
    }

    /// The eight bytes of `word`, least significant first: the same as combining them one by
    /// one, a word at a time.
    public mutating func combine(littleEndianBytesOf word: UInt64) {
        if tailCount == 0 {
            compress(word)
        } else {
            let shift = UInt64(8 * tailCount)
            compress(tail | word << shift)
            tail = word >> (64 - shift)
        }
        length &+= 8
    }

    /// `bytes` in order, eight at a time where they allow.
    public mutating func combine(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset + 8 <= bytes.count {
            combine(littleEndianBytesOf: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        while offset < bytes.count {
            combine(bytes[offset])
            offset += 1
        }
    }

    /// The 128-bit output, as the reference's 16 bytes: `first` is bytes 0...7 and `second`
    /// bytes 8...15, each little-endian.
    public consuming func finalize() -> (first: UInt64, second: UInt64) {
        compress(tail | (length & 0xff) << 56)
        v2 ^= 0xee
        for _ in 0..<4 { round() }
        let first = v0 ^ v1 ^ v2 ^ v3
        v1 ^= 0xdd
        for _ in 0..<4 { round() }
        return (first, v0 ^ v1 ^ v2 ^ v3)
    }

    private mutating func compress(_ block: UInt64) {
        v3 ^= block
        round()
        round()
        v0 ^= block
    }

    private mutating func round() {
        v0 &+= v1; v1 = v1.rotatedLeft(13); v1 ^= v0; v0 = v0.rotatedLeft(32)
        v2 &+= v3; v3 = v3.rotatedLeft(16); v3 ^= v2
        v0 &+= v3; v3 = v3.rotatedLeft(21); v3 ^= v0
        v2 &+= v1; v1 = v1.rotatedLeft(17); v1 ^= v2; v2 = v2.rotatedLeft(32)
    }
}

extension UInt64 {
    fileprivate func rotatedLeft(_ count: UInt64) -> UInt64 { self << count | self >> (64 - count) }
}
