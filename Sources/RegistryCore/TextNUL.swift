extension String {
    /// Whether the text holds a NUL byte, which a protobuf-c string field cannot carry. It reads
    /// the UTF-8 bytes where they are stored: walking `utf8` as a generic sequence was a sixth of
    /// the node's cost of packing a watch event (docs/performance.md, "The change feed").
    public var containsNUL: Bool {
        !isEmpty && (utf8.withContiguousStorageIfAvailable { $0.contains(0) } ?? utf8.contains(0))
    }
}
