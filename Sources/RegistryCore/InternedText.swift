import Synchronization

/// A text stored once for the life of the process and named by a pointer to it: a copy is one
/// word and counts no references, and two are equal exactly when they point to the same text.
///
/// Vendors, bundle IDs and node IDs are interned texts. Held as `String`s, a name of more than
/// the 15 bytes a string keeps in place lived in a heap buffer that every copy retained and
/// released, and an operation's names are copied many times between a decoder and the state
/// (measured in docs/performance.md, "Names interned for the process").
///
/// Texts are told apart, and ordered, by their UTF-8 bytes. A text is never freed: there is one
/// for each distinct name the process made, which its state mostly keeps anyway (it numbers
/// every vendor, bundle and node it holds). So text a client sends is made into a name only
/// where the client may write what it names: reads (lookups, causal tokens, watch cursors) use
/// ``existing(_:)``, and a request its token does not allow is refused before its names are
/// read (docs/security.md, "Exposure"). Making a text looks it up in a table
/// behind a lock; registrations, whose names the callers remember (``BundleResolver``, the
/// decoders' memos), take it once a distinct name, other operations once each.
public struct InternedText: Hashable, Comparable, CustomStringConvertible {
    /// What a text's pointer names. Never changed or freed once made.
    struct Storage {
        /// `TextHash.of(string)`, computed once.
        let hash: UInt64
        let string: String
        /// A copy of `string`'s UTF-8 bytes, for reads that make no `String`.
        let bytes: UnsafeBufferPointer<UInt8>
    }

    private let storage: UnsafePointer<Storage>

    /// The one text whose bytes are `string`'s, made when this is the first time.
    public init(_ string: String) {
        self = InternedTextTable.shared.text(string, making: true)!
    }

    /// The text whose bytes are `string`'s when one was made; nil otherwise. Makes none.
    public static func existing(_ string: String) -> InternedText? {
        InternedTextTable.shared.text(string, making: false)
    }

    fileprivate init(storage: UnsafePointer<Storage>) {
        self.storage = storage
    }

    /// The text as a string. A string of more than 15 bytes shares the text's buffer: reading
    /// it retains that, so every read on an operation's path reads ``utf8`` instead.
    public var string: String { storage.pointee.string }

    /// The text's UTF-8 bytes, valid for the life of the process.
    public var utf8: UnsafeBufferPointer<UInt8> { storage.pointee.bytes }

    /// `TextHash.of(string)`: the same for the same text in one process, random across processes.
    var textHash: UInt64 { storage.pointee.hash }

    public var description: String { string }

    public static func == (lhs: InternedText, rhs: InternedText) -> Bool { lhs.storage == rhs.storage }

    public func hash(into hasher: inout Hasher) { hasher.combine(textHash) }

    /// Byte order, consistent with equality. For the ASCII that vendors, bundle IDs and node IDs
    /// are checked to be it is `String`'s order too; `String`'s own would call two spellings of
    /// one accented letter neither equal nor ordered here (a vendor decoded from a peer is not
    /// checked).
    public static func < (lhs: InternedText, rhs: InternedText) -> Bool {
        lhs.storage != rhs.storage && lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
    }
}

// A text's storage is written once, before the lock that publishes its pointer is released,
// and never changed or freed after: every thread that holds the pointer reads the same bytes.
extension InternedText: @unchecked Sendable {}

/// The process's interned texts: open addressing over the texts' ``TextHash``es, behind a lock.
final class InternedTextTable: Sendable {
    static let shared = InternedTextTable()

    private struct Table: ~Copyable {
        /// A power of two, at most half full; nil is free.
        var buckets = [InternedText?](repeating: nil, count: 256)
        var count = 0
    }

    // The table only holds texts, whose storage is immutable once made (see InternedText's
    // Sendable conformance); the lock orders every read and write of the buckets themselves.
    private let table = Mutex(Table())

    /// The text whose bytes are `string`'s; when there is none, one made, or nil when not
    /// `making`.
    func text(_ string: String, making: Bool) -> InternedText? {
        let hash = TextHash.of(string)
        let kept = string
        var string = string
        return string.withUTF8 { bytes in
            table.withLock { table in
                var mask = table.buckets.count - 1
                var bucket = Int(truncatingIfNeeded: hash) & mask
                while let stored = table.buckets[bucket] {
                    if stored.textHash == hash && stored.utf8.elementsEqual(bytes) { return stored }
                    bucket = (bucket + 1) & mask
                }
                guard making else { return nil }
                let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
                _ = copy.initialize(fromContentsOf: bytes)
                let storage = UnsafeMutablePointer<InternedText.Storage>.allocate(capacity: 1)
                storage.initialize(to: InternedText.Storage(hash: hash, string: kept, bytes: UnsafeBufferPointer(copy)))
                let made = InternedText(storage: storage)
                table.buckets[bucket] = made
                table.count += 1
                if table.count * 2 > table.buckets.count {
                    var grown = [InternedText?](repeating: nil, count: table.buckets.count * 2)
                    mask = grown.count - 1
                    for case let stored? in table.buckets {
                        var place = Int(truncatingIfNeeded: stored.textHash) & mask
                        while grown[place] != nil { place = (place + 1) & mask }
                        grown[place] = stored
                    }
                    table.buckets = grown
                }
                return made
            }
        }
    }
}
