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
/// Texts are told apart by their bytes as they came (a text repaired from invalid UTF-8 too):
/// first by a ``Fingerprint`` of a few words, which for texts of up to 16 bytes is all that is
/// compared; a longer text's bytes are compared too (docs/performance.md, "Texts a decoder
/// remembers").
///
/// Sets rather than one slot a text: texts that hash to one slot would evict each other on every
/// turn, though the memo had room for both.
struct TextMemo<Value> {
    /// A text's length and its first and last eight bytes, which overlap below 16 bytes and are
    /// zero-padded below eight: equal fingerprints are equal texts up to 16 bytes.
    private struct Fingerprint: Equatable {
        let head: UInt64
        let tail: UInt64
        let count: Int

        init(_ bytes: UnsafeRawBufferPointer) {
            var head: UInt64 = 0
            var tail: UInt64 = 0
            count = bytes.count
            if count >= 8 {
                head = bytes.loadUnaligned(as: UInt64.self)
                tail = bytes.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            } else if count > 0 {
                withUnsafeMutableBytes(of: &head) { $0.copyMemory(from: bytes) }
                tail = head
            }
            self.head = head
            self.tail = tail
        }

        /// Whether a text with this fingerprint has bytes the fingerprint does not hold.
        var hasMiddle: Bool { count > 16 }

        /// Mixed by SplitMix64's finaliser so that every input bit reaches the set bits (texts of
        /// one vendor differ in their last byte or two); a collision costs only a miss.
        var hash: UInt64 {
            var mixed = head &+ (tail ^ UInt64(count)) &* 0x9E37_79B9_7F4A_7C15
            mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            return mixed ^ (mixed >> 31)
        }
    }

    /// A text remembered, and the value made from it.
    private struct Entry {
        let fingerprint: Fingerprint
        /// The text's bytes when the fingerprint does not hold them all; nil otherwise, so that
        /// copying the entry of a short text retains nothing (the values made, vendors, bundle
        /// IDs and node IDs, are plain data).
        let bytes: [UInt8]?
        let value: Value

        init(_ fingerprint: Fingerprint, _ bytes: UnsafeRawBufferPointer, _ value: Value) {
            self.fingerprint = fingerprint
            self.bytes = fingerprint.hasMiddle ? Array(bytes) : nil
            self.value = value
        }

        /// Whether this entry is the text `bytes`, whose fingerprint is `fingerprint`.
        func holds(_ fingerprint: Fingerprint, _ bytes: UnsafeRawBufferPointer) -> Bool {
            guard self.fingerprint == fingerprint else { return false }
            guard let kept = self.bytes else { return true }
            // Equal fingerprints: the same length, past 16 bytes.
            return kept.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
        }
    }

    /// Entries a set holds at most.
    static var ways: Int { 4 }
    private let slots: Int
    private let ways: Int
    /// `slots / ways - 1`: a hash's set, masked (the sets are a power of two), without a division
    /// at each lookup.
    private let setMask: Int
    private var last: Entry?
    /// `slots / ways` sets of `ways` entries each, in order, allocated at the first text made.
    private var table: [Entry?] = []

    /// `slots` is rounded up to a power of two.
    init(slots: Int) {
        var size = 1
        while size < slots { size <<= 1 }
        self.slots = size
        ways = min(size, Self.ways)
        setMask = size / ways - 1
    }

    /// The value of the text `bytes` hold (UTF-8, invalid bytes repaired), made by `make` unless
    /// remembered; nil when `make` refuses the text (a refusal is not remembered).
    mutating func value(_ bytes: UnsafeRawBufferPointer, make: (String) -> Value?) -> Value? {
        let fingerprint = Fingerprint(bytes)
        if last?.holds(fingerprint, bytes) == true { return last!.value }
        guard slots > 1 else {
            guard let value = make(String(decoding: bytes, as: UTF8.self)) else { return nil }
            last = Entry(fingerprint, bytes, value)
            return value
        }
        let first = (Int(truncatingIfNeeded: fingerprint.hash) & setMask) &* ways
        if !table.isEmpty {
            for way in first..<first + ways {
                guard table[way] != nil else { break }
                if table[way]!.holds(fingerprint, bytes) {
                    last = table[way]
                    return last!.value
                }
            }
        }
        guard let value = make(String(decoding: bytes, as: UTF8.self)) else { return nil }
        let entry = Entry(fingerprint, bytes, value)
        last = entry
        if table.isEmpty { table = Array(repeating: nil, count: slots) }
        // In first, the others one place on; the oldest, at the set's end, goes.
        for way in stride(from: first + ways - 1, to: first, by: -1) { table[way] = table[way - 1] }
        table[first] = entry
        return value
    }
}
