/// A 128-bit UUID value held as 16 bytes in two words, with RFC 9562 text form.
///
/// Parsing accepts the canonical 8-4-4-4-12 hex form in either case; formatting
/// always prints lower case. Ordering is by the big-endian bytes.
public struct UUID128: Hashable, Comparable, Sendable, BitwiseCopyable {
    /// Bytes 0...7, big-endian.
    public let high: UInt64
    /// Bytes 8...15, big-endian.
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The all-zero UUID, which the registry never accepts as an identifier.
    public static let zero = UUID128(high: 0, low: 0)

    public var isZero: Bool { high == 0 && low == 0 }

    /// Builds a value from exactly 16 bytes; nil for any other count.
    public init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        guard bytes.count == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 {
                high = high << 8 | UInt64(byte)
            } else {
                low = low << 8 | UInt64(byte)
            }
        }
        self.init(high: high, low: low)
    }

    /// The 16 big-endian bytes.
    public var bytes: [UInt8] {
        var result = [UInt8]()
        result.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { result.append(UInt8(truncatingIfNeeded: high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { result.append(UInt8(truncatingIfNeeded: low >> UInt64(shift))) }
        return result
    }

    /// Parses `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hex digits in either case.
    /// Returns nil for anything else.
    public init?(text: String) {
        var contiguous = text
        guard let value = contiguous.withUTF8({ UUID128.parse($0) }) else { return nil }
        self = value
    }

    /// As ``init(text:)``, from UTF-8 bytes.
    public init?(utf8: UnsafeBufferPointer<UInt8>) {
        guard let value = UUID128.parse(utf8) else { return nil }
        self = value
    }

    /// The length of UUID text in bytes.
    public static let textLength = 36

    private static func parse(_ chars: UnsafeBufferPointer<UInt8>) -> UUID128? {
        parseNoting(chars)?.value
    }

    /// Parses UUID text as ``init(utf8:)`` does, and says which cases its hex letters were in.
    ///
    /// The 32 hex digits are read as four words of eight bytes and checked and converted eight
    /// at a time, with no table lookup and no branch per byte (random hex mispredicts any
    /// branch on it; docs/performance.md has the figures). Each byte's top bit answers a range
    /// question: adding
    /// `0x80 - lower bound` to a byte below 0x80 sets it exactly when the byte is at least that
    /// bound, and no carry crosses into the next byte.
    static func parseNoting(_ chars: UnsafeBufferPointer<UInt8>) -> (value: UUID128, lower: Bool, upper: Bool)? {
        guard chars.count == 36, let base = chars.baseAddress, base[8] == dash, base[13] == dash, base[18] == dash, base[23] == dash
        else { return nil }
        let text = UnsafeRawPointer(base)
        func word(_ offset: Int) -> UInt64 { UInt64(littleEndian: text.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        func halves(_ first: Int, _ second: Int) -> UInt64 {
            UInt64(UInt32(littleEndian: text.loadUnaligned(fromByteOffset: first, as: UInt32.self)))
                | UInt64(UInt32(littleEndian: text.loadUnaligned(fromByteOffset: second, as: UInt32.self))) << 32
        }
        // The digits in text order, the first of each word in its lowest byte.
        let digits = (word(0), halves(9, 14), halves(19, 24), word(28))
        var checks = HexWord()
        let high = checks.bytes(digits.0) << 32 | checks.bytes(digits.1)
        let low = checks.bytes(digits.2) << 32 | checks.bytes(digits.3)
        guard checks.valid else { return nil }
        return (UUID128(high: high, low: low), checks.lower, checks.upper)
    }

    /// Eight hex digits at a time (see ``parseNoting(_:)``), and what they held.
    private struct HexWord {
        private static let ones: UInt64 = 0x0101_0101_0101_0101
        private static let tops: UInt64 = 0x8080_8080_8080_8080
        private var invalid: UInt64 = 0
        private var lowerLetters: UInt64 = 0
        private var upperLetters: UInt64 = 0

        var valid: Bool { invalid == 0 }
        var lower: Bool { lowerLetters != 0 }
        var upper: Bool { upperLetters != 0 }

        /// The value of eight hex digits, the first in `digits`' lowest byte, as 32 bits.
        @inline(__always) mutating func bytes(_ digits: UInt64) -> UInt64 {
            func atLeast(_ bound: UInt8, _ bytes: UInt64) -> UInt64 { (bytes &+ UInt64(0x80 - bound) &* Self.ones) & Self.tops }
            let folded = digits | 0x20 &* Self.ones
            let isDigit = atLeast(0x30, digits) & ~atLeast(0x3A, digits)
            let isLetter = atLeast(0x61, folded) & ~atLeast(0x67, folded)
            // A byte of 0x80 or more is no digit, and would carry in the checks above.
            invalid |= (~(isDigit | isLetter) & Self.tops) | (digits & Self.tops)
            // Bit 5 (0x20) marks a lower-case letter; moved up to the top bit.
            lowerLetters |= isLetter & digits << 2
            upperLetters |= isLetter & ~(digits << 2)
            // A digit's value is its low nibble, a letter's that plus 9 (bit 6, 0x40, marks a letter).
            let nibbles = (digits & (0x0F &* Self.ones)) &+ (digits >> 6 & Self.ones) &* 9
            // Each pair of nibbles into one byte, in the even bytes; then the four bytes together.
            var packed = (nibbles << 4 | nibbles >> 8) & 0x00FF_00FF_00FF_00FF
            packed = (packed | packed >> 8) & 0x0000_FFFF_0000_FFFF
            packed = (packed | packed >> 16) & 0xFFFF_FFFF
            // The first digit pair is the most significant byte.
            return UInt64(UInt32(truncatingIfNeeded: packed).byteSwapped)
        }
    }

    private static let dash = UInt8(ascii: "-")

    /// Lower-case 8-4-4-4-12 text. Written straight into the string's storage: one allocation.
    public var text: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            writeText(to: buffer)
            return Self.textLength
        }
    }

    /// Writes the 8-4-4-4-12 text (``textLength`` bytes) at the start of `buffer`.
    ///
    /// Eight digits at a time in one 64-bit word (see ``hexDigits(_:uppercase:)``), stored with
    /// six unaligned writes and four dashes: a digit at a time was 5% of a load generator's CPU
    /// and 1% of a node's, which write two and one of these per registration.
    public func writeText(to buffer: UnsafeMutableBufferPointer<UInt8>, uppercase: Bool = false) {
        precondition(buffer.count >= Self.textLength)
        let raw = UnsafeMutableRawPointer(buffer.baseAddress!)
        let first = Self.hexDigits(UInt32(truncatingIfNeeded: high >> 32), uppercase: uppercase)
        let second = Self.hexDigits(UInt32(truncatingIfNeeded: high), uppercase: uppercase)
        let third = Self.hexDigits(UInt32(truncatingIfNeeded: low >> 32), uppercase: uppercase)
        let fourth = Self.hexDigits(UInt32(truncatingIfNeeded: low), uppercase: uppercase)
        raw.storeBytes(of: first.littleEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: Self.dash, toByteOffset: 8, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: second).littleEndian, toByteOffset: 9, as: UInt32.self)
        raw.storeBytes(of: Self.dash, toByteOffset: 13, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: second >> 32).littleEndian, toByteOffset: 14, as: UInt32.self)
        raw.storeBytes(of: Self.dash, toByteOffset: 18, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: third).littleEndian, toByteOffset: 19, as: UInt32.self)
        raw.storeBytes(of: Self.dash, toByteOffset: 23, as: UInt8.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: third >> 32).littleEndian, toByteOffset: 24, as: UInt32.self)
        raw.storeBytes(of: fourth.littleEndian, toByteOffset: 28, as: UInt64.self)
    }

    /// The eight hex digits of `value`, most significant first, as ASCII bytes packed in a word
    /// whose lowest byte is the first digit (so that a little-endian store writes them in order).
    /// Each nibble is spread into a byte of its own, then `'0'` is added, plus the distance from
    /// `'9' + 1` to `'a'` (or `'A'`) for the nibbles above 9, found without a branch: a nibble
    /// plus 6 carries into bit 4 exactly when it is 10 or more.
    static func hexDigits(_ value: UInt32, uppercase: Bool) -> UInt64 {
        var x = UInt64(value)
        x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
        x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
        x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // The most significant nibble is now in the most significant byte: reverse the bytes.
        x = x.byteSwapped
        let aboveNine = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        let letterOffset: UInt64 = uppercase ? 0x07 : 0x27
        return x &+ 0x3030_3030_3030_3030 &+ aboveNine &* letterOffset
    }

    public static func < (lhs: UUID128, rhs: UUID128) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

extension UUID128: CustomStringConvertible {
    public var description: String { text }
}
