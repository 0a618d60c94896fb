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
        guard chars.count == 36, chars[8] == dash, chars[13] == dash, chars[18] == dash, chars[23] == dash else {
            return nil
        }
        // Every digit's value is or-ed into `invalid` too: any 0xFF (not a hex digit) shows.
        var invalid: UInt8 = 0
        func digits(_ range: Range<Int>, into word: inout UInt64) {
            for offset in range {
                let nibble = hexValues[Int(chars[offset])]
                invalid |= nibble
                word = word << 4 | UInt64(nibble & 0xF)
            }
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        digits(0..<8, into: &high)
        digits(9..<13, into: &high)
        digits(14..<18, into: &high)
        digits(19..<23, into: &low)
        digits(24..<36, into: &low)
        return invalid & 0xF0 == 0 ? UUID128(high: high, low: low) : nil
    }

    private static let dash = UInt8(ascii: "-")
    private static let lowerDigits: StaticString = "0123456789abcdef"
    private static let upperDigits: StaticString = "0123456789ABCDEF"

    /// Each byte's hex value, 0xFF for bytes that are not hex digits.
    private static let hexValues: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt8(byte) - UInt8(ascii: "A") + 10
        default: return 0xFF
        }
    }

    /// Lower-case 8-4-4-4-12 text. Written straight into the string's storage: one allocation.
    public var text: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            writeText(to: buffer)
            return Self.textLength
        }
    }

    /// Writes the 8-4-4-4-12 text (``textLength`` bytes) at the start of `buffer`.
    public func writeText(to buffer: UnsafeMutableBufferPointer<UInt8>, uppercase: Bool = false) {
        precondition(buffer.count >= Self.textLength)
        // A table rather than `nibble < 10 ? … : …`, which mispredicted on random hex.
        let digits = (uppercase ? Self.upperDigits : Self.lowerDigits).utf8Start
        var out = 0
        for index in 0..<32 {
            if index == 8 || index == 12 || index == 16 || index == 20 {
                buffer[out] = Self.dash
                out += 1
            }
            let word = index < 16 ? high : low
            let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (index % 16))) & 0xF
            buffer[out] = digits[Int(nibble)]
            out += 1
        }
    }

    public static func < (lhs: UUID128, rhs: UUID128) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

extension UUID128: CustomStringConvertible {
    public var description: String { text }
}
