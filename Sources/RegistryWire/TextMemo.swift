import Platform

/// Values made from the bytes of a text field, remembered by those bytes: a replay or a peer's
/// batch reads the same few origins, vendors and bundle IDs over and over, and making one again
/// (a string, its validation, its hash) is a large part of decoding a registration
/// (docs/performance.md, "Replaying registrations", has the measurement).
///
/// Set-associative: `slots` entries in sets of up to ``ways``, each text in the set its bytes
/// hash to, newest first; a text new to a full set pushes out its oldest. The last text made or
/// found is also checked first. With one slot it holds the last text only, and allocates
/// nothing. A value is made once for each run of misses, so `make` must give the same value for
/// the same bytes.
///
/// Sets rather than one slot a text: texts that hash to one slot would evict each other on every
/// turn, though the memo had room for both (docs/performance.md, "Texts a decoder remembers").
struct TextMemo<Value> {
    private typealias Entry = (hash: UInt64, text: String, value: Value)
    /// Entries a set holds at most.
    static var ways: Int { 4 }
    private let slots: Int
    private let ways: Int
    private var last: (text: String, value: Value)?
    /// `slots / ways` sets of `ways` entries each, in order, allocated at the first text made.
    private var table: [Entry?] = []

    /// `slots` is rounded up to a power of two.
    init(slots: Int) {
        var size = 1
        while size < slots { size <<= 1 }
        self.slots = size
        ways = min(size, Self.ways)
    }

    /// The value of the text `bytes` hold (UTF-8, invalid bytes repaired), made by `make` unless
    /// remembered; nil when `make` refuses the text (a refusal is not remembered).
    mutating func value(_ bytes: UnsafeRawBufferPointer, make: (String) -> Value?) -> Value? {
        if let held = last, Self.holds(held.text, bytes) { return held.value }
        guard slots > 1 else {
            let text = String(decoding: bytes, as: UTF8.self)
            guard let value = make(text) else { return nil }
            last = (text, value)
            return value
        }
        let hash = Self.hash(bytes)
        let first = (Int(truncatingIfNeeded: hash) & (slots / ways - 1)) * ways
        if !table.isEmpty {
            for way in first..<first + ways {
                guard let held = table[way] else { break }
                if held.hash == hash, Self.holds(held.text, bytes) {
                    last = (held.text, held.value)
                    return held.value
                }
            }
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let value = make(text) else { return nil }
        last = (text, value)
        // A text repaired from invalid UTF-8 would never be found: it would only push out others.
        guard Self.holds(text, bytes) else { return value }
        if table.isEmpty { table = Array(repeating: nil, count: slots) }
        // In first, the others one place on; the oldest, at the set's end, goes.
        for way in stride(from: first + ways - 1, to: first, by: -1) { table[way] = table[way - 1] }
        table[first] = (hash, text, value)
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
