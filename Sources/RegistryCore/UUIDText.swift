/// Text that is usually UUID text (a device ID, an identifier), kept as the 16-byte value when
/// it is one, so that no `String` is made for it on the request path: such a string is too long
/// to be stored inline, so each one cost an allocation, a copy and a release, and a
/// registration carried three of them. Anything else is kept as the text it was.
///
/// It compares and hashes as its text: a value and the same text held as a string are equal.
public struct UUIDText: Hashable, Sendable, CustomStringConvertible {
    enum Form: Sendable {
        /// UUID text whose hex letters were all lower case, or all upper case.
        case uuid(UUID128, uppercase: Bool)
        case text(String)
    }

    let form: Form

    /// `text` as it is (parsed only when read, by ``uuid``).
    public init(_ text: String) {
        form = .text(text)
    }

    /// The lower-case text of `uuid`, made only when read.
    public init(uuid: UUID128) {
        form = .uuid(uuid, uppercase: false)
    }

    /// UTF-8 bytes as they arrive on the wire: UUID text in one case is kept as its value, and
    /// anything else becomes a string (invalid UTF-8 repaired, as `String(decoding:as:)` does).
    public init(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        // Text with letters of both cases is kept as text: only the text can reproduce it.
        if let parsed = UUID128.parseNoting(bytes), !(parsed.lower && parsed.upper) {
            form = .uuid(parsed.value, uppercase: parsed.upper)
        } else {
            form = .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// The text.
    public var text: String {
        switch form {
        case .uuid(let uuid, let uppercase): return uppercase ? uuid.text.uppercased() : uuid.text
        case .text(let text): return text
        }
    }

    public var description: String { text }

    /// The UUID, when the text is UUID text (in either case).
    public var uuid: UUID128? {
        switch form {
        case .uuid(let uuid, _): return uuid
        case .text(let text): return UUID128(text: text)
        }
    }

    /// Whether the text holds a NUL byte (UUID text never does).
    public var containsNUL: Bool {
        if case .text(let text) = form { return text.containsNUL }
        return false
    }

    /// The text's length in UTF-8 bytes.
    public var utf8Count: Int {
        switch form {
        case .uuid: return UUID128.textLength
        case .text(let text): return text.utf8.count
        }
    }

    /// Writes the text's ``utf8Count`` UTF-8 bytes at `destination`.
    public func writeUTF8(to destination: UnsafeMutablePointer<UInt8>) {
        switch form {
        case .uuid(let uuid, let uppercase):
            uuid.writeText(to: UnsafeMutableBufferPointer(start: destination, count: UUID128.textLength), uppercase: uppercase)
        case .text(let text):
            _ = UnsafeMutableBufferPointer(start: destination, count: text.utf8.count).initialize(from: text.utf8)
        }
    }

    public static func == (lhs: UUIDText, rhs: UUIDText) -> Bool {
        if case .uuid(let left, let leftUpper) = lhs.form, case .uuid(let right, let rightUpper) = rhs.form {
            return left == right && leftUpper == rightUpper
        }
        return lhs.text == rhs.text
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(text)
    }
}
