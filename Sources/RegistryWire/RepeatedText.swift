import Platform

/// Strings made from the bytes of one field as a message's repeated parts carry it, reusing the
/// last one when the bytes are the same: the events of a watch frame mostly share their vendor
/// and origin, and the registrations of a batch often their bundle ID. It holds the last bytes,
/// so it lives no longer than the buffer they point into (one decode).
struct RepeatedText {
    private var last: (bytes: UnsafeRawBufferPointer, text: String)?

    /// `bytes`, UTF-8, as a string (invalid UTF-8 repaired, a NUL kept).
    mutating func string(_ bytes: UnsafeRawBufferPointer) -> String {
        if let held = last, held.bytes.count == bytes.count,
            bytes.count == 0 || memcmp(held.bytes.baseAddress!, bytes.baseAddress!, bytes.count) == 0
        {
            return held.text
        }
        let text = String(decoding: bytes, as: UTF8.self)
        last = (bytes, text)
        return text
    }
}

/// The origin and the vendor of the previous record a decode read: a watch frame's events mostly
/// share them (``WatchEventsReader``).
struct RepeatedOriginAndVendor {
    var origin = RepeatedText()
    var vendor = RepeatedText()
}
