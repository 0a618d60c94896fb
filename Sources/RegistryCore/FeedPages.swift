/// The feed's events in pages of 4,096: appending never moves what is held, and dropping the
/// oldest lets go of whole pages, so no step moves the whole feed (compacting one array of a
/// million events would move them all at once, on the commit path).
///
/// Pages come from a ``TableAllocator``, and a page the feed drops is emptied and kept for the
/// next one (up to ``sparePages``) rather than freed. A node's allocator maps its pages apart
/// from the heap and keeps them out of a forked snapshot's child (`MADV_DONTFORK`): the child
/// never reads the feed, and a page of the heap that the parent writes while the child lives,
/// or first writes after a fork at all, costs a page fault and a TLB shootdown across the cores
/// (`docs/performance.md`, "Feed pages a snapshot's child does not share"). Reusing a page also
/// keeps the memory new to the process down to the feed's size.
///
/// A value: copies share pages, which are only read through them; before writing to its last
/// page, a feed that does not hold the only reference to it copies the page first.
struct FeedPages: Sendable {
    static let pageSize = FeedPage.capacity
    /// Emptied pages kept for reuse: the feed drops a page about as often as it starts one.
    static let sparePages = 2

    private let allocator: any TableAllocator
    /// Every page but the last is full.
    private var pages: [FeedPage] = []
    /// Emptied pages, held by nothing else when kept; a copy of the feed shares them, so each is
    /// checked again when taken.
    private var spare: [FeedPage] = []
    /// Index in `pages[0]` of the oldest event held.
    private var head = 0
    private(set) var count = 0

    init(allocator: any TableAllocator = HeapTableAllocator()) {
        self.allocator = allocator
    }

    mutating func append(contentsOf entries: [FeedEntry]) {
        for entry in entries {
            if pages.isEmpty || pages[pages.count - 1].isFull {
                pages.append(newPage())
            } else if !isKnownUniquelyReferenced(&pages[pages.count - 1]) {
                let copy = newPage()
                copy.append(contentsOf: pages[pages.count - 1])
                pages[pages.count - 1] = copy
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
            keep(pages.removeFirst())
        }
    }

    mutating func removeAll() {
        while let page = pages.popLast() { keep(consume page) }
        head = 0
        count = 0
    }

    /// Puts `entry` in place of the `index`-th event held. A page that a copy of the feed shares
    /// is copied first, so that the copy keeps what it held.
    mutating func replace(at index: Int, with entry: FeedEntry) {
        let at = head + index
        let page = at / Self.pageSize
        if !isKnownUniquelyReferenced(&pages[page]) {
            let copy = newPage()
            copy.append(contentsOf: pages[page])
            pages[page] = copy
        }
        pages[page].replace(at: at % Self.pageSize, with: entry)
    }

    /// `body`'s answer about the `index`-th event held, lent rather than copied.
    func withEntry<Result>(at index: Int, _ body: (borrowing FeedEntry) -> Result) -> Result {
        let at = head + index
        return pages[at / Self.pageSize].withEntry(at: at % Self.pageSize, body)
    }

    /// The `index`-th event held, from the oldest.
    subscript(index: Int) -> FeedEntry {
        withEntry(at: index) { (entry: borrowing FeedEntry) in copy entry }
    }

    /// A kept page that nothing else holds (a copy of this feed, which shares `spare`, may have
    /// taken one), or else a new one.
    private mutating func newPage() -> FeedPage {
        while var page = spare.popLast() {
            if isKnownUniquelyReferenced(&page) { return page }
        }
        return FeedPage(allocator: allocator)
    }

    /// Keeps a dropped page for reuse when there is room and nothing else holds it.
    private mutating func keep(_ page: consuming FeedPage) {
        var page = page
        guard spare.count < Self.sparePages, isKnownUniquelyReferenced(&page) else { return }
        page.removeAll()
        spare.append(page)
    }
}

/// Up to ``capacity`` feed entries in a block from a ``TableAllocator``, in order.
///
/// `@unchecked Sendable`: the entries are reached through a pointer, which the compiler cannot
/// check. ``FeedPages`` writes to a page (``append(_:)``, ``replace(at:with:)``, ``removeAll()``) only while it holds
/// the only reference to it (`isKnownUniquelyReferenced`, checked on the one thread that holds
/// that `FeedPages` mutably: before appending to its last page, before replacing an entry,
/// before emptying a dropped page, and before reusing a kept one), and every other use only reads entries already written; so
/// no write races a read.
final class FeedPage: @unchecked Sendable {
    static let capacity = 4_096

    /// Holds the memory; freed with the page.
    private let block: any TableBlock
    private let entries: UnsafeMutablePointer<FeedEntry>
    private(set) var count = 0

    init(allocator: any TableAllocator) {
        block = allocator.zeroedBlock(bytes: Self.capacity * MemoryLayout<FeedEntry>.stride)
        precondition(Int(bitPattern: block.base) % MemoryLayout<FeedEntry>.alignment == 0, "a feed page's block is misaligned")
        entries = block.base.bindMemory(to: FeedEntry.self, capacity: Self.capacity)
    }

    deinit {
        entries.deinitialize(count: count)
    }

    var isFull: Bool { count == Self.capacity }

    func append(_ entry: FeedEntry) {
        precondition(!isFull, "a feed page holds \(Self.capacity) entries")
        (entries + count).initialize(to: entry)
        count += 1
    }

    func append(contentsOf page: FeedPage) {
        for index in 0..<page.count { append(page.entries[index]) }
    }

    func replace(at index: Int, with entry: FeedEntry) {
        precondition(index >= 0 && index < count, "entry \(index) of a page of \(count)")
        entries[index] = entry
    }

    func removeAll() {
        entries.deinitialize(count: count)
        count = 0
    }

    func withEntry<Result>(at index: Int, _ body: (borrowing FeedEntry) -> Result) -> Result {
        precondition(index >= 0 && index < count, "entry \(index) of a page of \(count)")
        return body(entries[index])
    }
}
