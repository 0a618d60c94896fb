extension String {
    /// Whether the text holds a NUL byte, which a protobuf-c string field cannot carry. It reads
    /// the UTF-8 bytes where they are stored rather than walking `utf8` as a generic sequence,
    /// since every watch event is checked before it is packed (docs/performance.md, "The change feed").
    public var containsNUL: Bool {
        !isEmpty && (utf8.withContiguousStorageIfAvailable { $0.contains(0) } ?? utf8.contains(0))
    }
}
