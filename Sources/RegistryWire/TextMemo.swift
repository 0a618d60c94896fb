import Platform

/// Values made from the bytes of a text field, remembered by those bytes: a replay or a peer's
/// batch reads the same few origins, vendors and bundle IDs over and over, and making one again
/// (a string, its validation, its hash) is a large part of decoding a registration
/// (docs/performance.md, "Replaying registrations", has the measurement).
///
/// Direct-mapped: `slots` entries, each text in the one its bytes hash to, replacing what was
/// there; the last text made is also checked first. With one slot it holds the last text only,
/// and allocates nothing. A value is made once for each run of misses, so `make` must give the
/// same value for the same bytes.
struct TextMemo<Value> {
    private typealias Entry = (text: String, value: Value)
    private let slots: Int
    private var last: Entry?
    private var table: [Entry?] = []

    /// `slots` is rounded up to a power of two.
    init(slots: Int) {
        var size = 1
        while size < slots { size <<= 1 }
        self.slots = size
    }

    /// The value of the text `bytes` hold (UTF-8, invalid bytes repaired), made by `make` unless
    /// remembered; nil when `make` refuses the text (a refusal is not remembered).
    mutating func value(_ bytes: UnsafeRawBufferPointer, make: (String) -> Value?) -> Value? {
        if let held = last, Self.holds(held.text, bytes) { return held.value }
        let slot = slots == 1 ? -1 : Int(truncatingIfNeeded: Self.hash(bytes)) & (slots - 1)
        if slot >= 0, !table.isEmpty, let held = table[slot], Self.holds(held.text, bytes) {
            last = held
            return held.value
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let value = make(text) else { return nil }
        last = (text, value)
        if slot >= 0 {
            if table.isEmpty { table = Array(repeating: nil, count: slots) }
            table[slot] = (text, value)
        }
        return value
    }

    /// Whether `text` was made from exactly `bytes`. A text made by repairing invalid UTF-8
    /// differs from its bytes, so those are made again each time, and give the same value.
    private static func holds(_ text: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var text = text
        return text.withUTF8 { utf8 in
            utf8.count == bytes.count && (bytes.count == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, bytes.count) == 0)
        }
    }

    /// The first and last eight bytes and the length, mixed by SplitMix64's finaliser so that every
    /// input bit reaches the slot bits (texts of one vendor differ in their last byte or two); a
    /// collision costs only a miss.
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var head: UInt64 = 0
        var tail: UInt64 = 0
        let count = bytes.count
        withUnsafeMutableBytes(of: &head) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[0..<min(8, count)])) }
        withUnsafeMutableBytes(of: &tail) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[max(0, count - 8)..<count])) }
        var mixed = head &+ (tail ^ UInt64(count)) &* 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
