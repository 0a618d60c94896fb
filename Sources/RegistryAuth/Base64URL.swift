/// Base64url without padding (RFC 4648 section 5), the alphabet tokens are written in.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var word = UInt32(0)
            for (offset, byte) in chunk.enumerated() { word |= UInt32(byte) << (16 - 8 * UInt32(offset)) }
            for position in 0...chunk.count { out.append(alphabet[Int(word >> (18 - 6 * UInt32(position)) & 63)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Nil for a character outside the alphabet or a length no encoding produces.
    static func decode(_ text: Substring) -> [UInt8]? {
        var out = [UInt8]()
        var word = UInt32(0), bits = 0
        for character in text.utf8 {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            word = word << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: word >> UInt32(bits)))
                word &= (1 << UInt32(bits)) - 1
            }
        }
        // 2 or 4 leftover bits are the padding of a 1- or 2-byte tail, and must be zero.
        guard bits < 6, word == 0 else { return nil }
        return out
    }
}
