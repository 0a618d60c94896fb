/// The checksums of the registry's files: 64 bits over a payload, eight bytes at a time, with a
/// multiply-xorshift mix per word, the length folded in at the end, and a seed (for a journal
/// record, the file number) mixed in first. They tell a torn or garbled record from a whole one;
/// they are not a defence against deliberate tampering. Public for the benchmarks
/// (bench/Benchmarks/JournalChecksum).
///
/// Two forms of the same mix. ``of(_:seed:)`` is one chain, each word waiting for the two
/// multiplies of the one before: snapshot files, and journal entries written before ``striped(_:seed:)``
/// existed ("RRJ2", read still). ``striped(_:seed:)`` runs four chains over every fourth word of
/// 32-byte stripes and folds them together at the end, so four words' multiplies are in flight at
/// once: the journal's entries ("RRJ3"), which a node seals on every commit and checks on every
/// replay (docs/performance.md, "The journal's checksum").
public enum JournalChecksum {
    /// The single chain.
    public static func of(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        finish(start(seed), bytes, from: 0)
    }

    /// Four chains (see the type's notes). Each starts from the seeded state with a constant of its
    /// own, so that two words trading lanes change the result.
    public static func striped(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        let first = start(seed)
        var lanes = (first, first ^ 0x9E37_79B9_7F4A_7C15, first ^ 0xBF58_476D_1CE4_E5B9, first ^ 0x94D0_49BB_1331_11EB)
        var offset = 0
        while offset + 32 <= bytes.count {
            lanes.0 = mix(lanes.0 ^ word(bytes, offset))
            lanes.1 = mix(lanes.1 ^ word(bytes, offset + 8))
            lanes.2 = mix(lanes.2 ^ word(bytes, offset + 16))
            lanes.3 = mix(lanes.3 ^ word(bytes, offset + 24))
            offset += 32
        }
        let folded = mix(mix(mix(lanes.0 ^ mix(lanes.1)) ^ lanes.2) ^ lanes.3)
        return finish(folded, bytes, from: offset)
    }

    private static func start(_ seed: UInt64) -> UInt64 { mix(0x6A09_E667_F3BC_C908 ^ seed) }

    /// The words from `offset` on, one chain, then the last bytes and the length.
    private static func finish(_ start: UInt64, _ bytes: UnsafeRawBufferPointer, from offset: Int) -> UInt64 {
        var hash = start
        var offset = offset
        while offset + 8 <= bytes.count {
            hash = mix(hash ^ word(bytes, offset))
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

    @inline(__always)
    private static func word(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    private static func mix(_ value: UInt64) -> UInt64 {
        var x = value &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 32
        x = x &* 0xBF58_476D_1CE4_E5B9
        return x ^ (x >> 29)
    }
}
