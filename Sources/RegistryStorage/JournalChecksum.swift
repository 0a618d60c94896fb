/// The checksum of a ``CommitJournal`` record: 64 bits over the payload, eight bytes at a time,
/// with a multiply-xorshift mix per word, the length folded in at the end, and a seed (the file
/// number) mixed in first. It tells a torn or garbled record from a whole one; it is not a
/// defence against deliberate tampering.
enum JournalChecksum {
    static func of(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        var hash: UInt64 = mix(0x6A09_E667_F3BC_C908 ^ seed)
        var offset = 0
        while offset + 8 <= bytes.count {
            hash = mix(hash ^ UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            tail |= UInt64(bytes[offset]) << shift
            shift += 8
            offset += 1
        }
        return mix(mix(hash ^ tail) ^ UInt64(bytes.count))
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var x = value &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 32
        x = x &* 0xBF58_476D_1CE4_E5B9
        return x ^ (x >> 29)
    }
}
