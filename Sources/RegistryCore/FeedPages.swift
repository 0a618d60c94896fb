/// The feed's events in pages of 4,096: appending never moves what is held, and dropping the
/// oldest frees whole pages, so no step moves the whole feed (compacting one array of a million
/// events would move them all at once, on the commit path).
///
/// A full feed drops a page about as often as it starts one, so the page dropped last is kept,
/// emptied, for the next to reuse: a new page is memory the kernel has to hand over zeroed, on
/// the commit path, once per 4,096 events.
struct FeedPages: Sendable {
    static let pageSize = 4_096
    /// Every page but the last is full.
    private var pages: [[FeedEntry]] = []
    /// The page dropped last, emptied, with its capacity.
    private var spare: [FeedEntry]?
    /// Index in `pages[0]` of the oldest event held.
    private var head = 0
    private(set) var count = 0

    mutating func append(contentsOf entries: [FeedEntry]) {
        for entry in entries {
            if pages.isEmpty || pages[pages.count - 1].count == Self.pageSize {
                pages.append(spare.take() ?? Self.newPage())
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
            var page = pages.removeFirst()
            page.removeAll(keepingCapacity: true)
            spare = page
        }
    }

    private static func newPage() -> [FeedEntry] {
        var page = [FeedEntry]()
        page.reserveCapacity(pageSize)
        return page
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
