/// The feed's events in pages of 4,096: appending never moves what is held, and dropping the
/// oldest frees whole pages, so no step moves the whole feed (compacting one array of a million
/// events would move them all at once, on the commit path).
struct FeedPages: Sendable {
    static let pageSize = 4_096
    /// Every page but the last is full.
    private var pages: [[FeedEntry]] = []
    /// Index in `pages[0]` of the oldest event held.
    private var head = 0
    private(set) var count = 0

    mutating func append(contentsOf entries: [FeedEntry]) {
        for entry in entries {
            if pages.isEmpty || pages[pages.count - 1].count == Self.pageSize {
                var page = [FeedEntry]()
                page.reserveCapacity(Self.pageSize)
                pages.append(page)
            }
            pages[pages.count - 1].append(entry)
        }
        count += entries.count
    }

    /// Drops the `dropped` oldest events.
    mutating func dropFirst(_ dropped: Int) {
        precondition(dropped <= count, "dropping more events than are held")
        head += dropped
        count -= dropped
        while !pages.isEmpty, head >= pages[0].count {
            head -= pages[0].count
            pages.removeFirst()
        }
    }

    mutating func removeAll() {
        pages = []
        head = 0
        count = 0
    }

    /// `body`'s answer about the `index`-th event held, lent rather than copied.
    func withEntry<Result>(at index: Int, _ body: (borrowing FeedEntry) -> Result) -> Result {
        let at = head + index
        return body(pages[at / Self.pageSize][at % Self.pageSize])
    }

    /// The `index`-th event held, from the oldest.
    subscript(index: Int) -> FeedEntry {
        let at = head + index
        return pages[at / Self.pageSize][at % Self.pageSize]
    }
}
