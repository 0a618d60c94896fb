/// A cheap keyed hash of a string's UTF-8 bytes (wyhash's folded multiply over 8-byte words),
/// for values hashed on every registration: vendors and bundles are interned to numbers, and
/// `Hasher` (SipHash, with Unicode checks on strings) cost more than the rest of the lookup.
/// The key is random per process, so clients cannot choose names that collide.
enum TextHash {
    static let key = UInt64.random(in: .min ... .max)

    static func of(_ text: String) -> UInt64 {
        var text = text
        return text.withUTF8 { bytes in
            var hash = key ^ UInt64(bytes.count)
            var offset = 0
            let raw = UnsafeRawBufferPointer(bytes)
            while offset + 8 <= raw.count {
                hash = foldedMultiply(hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self), 0x9E37_79B9_7F4A_7C15)
                offset += 8
            }
            var tail: UInt64 = 0
            for index in offset..<raw.count { tail |= UInt64(raw[index]) << UInt64(8 * (index - offset)) }
            return foldedMultiply(hash ^ tail, 0xA076_1D64_78BD_642F ^ key)
        }
    }
}
