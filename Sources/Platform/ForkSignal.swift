#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinuxFile

/// A one-way flag in a page shared with the children this process forks afterwards: a child
/// raises it, and the parent sees it with one memory read, no system call and no thread woken.
/// For a ``ForkedWriter`` child to tell its parent that it has got past a point (it let go of
/// memory the parent waits to write) before it writes anything into its pipe.
///
/// `@unchecked Sendable`: its only state is the address of the shared page, set once in `init`
/// and unmapped in `deinit`, and the page is read and written only with atomic operations.
public final class ForkSignal: @unchecked Sendable {
    private let word: UnsafeMutablePointer<UInt32>

    /// A lowered flag; nil when no shared page could be mapped.
    public init?() {
        let page = mmap(nil, Int(sysconf(Int32(_SC_PAGESIZE))), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
        guard let page, page != MAP_FAILED else { return nil }
        word = page.bindMemory(to: UInt32.self, capacity: 1)
        registry_store_release(word, 0)
    }

    deinit {
        munmap(word, Int(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// Raises the flag, in the child or the parent; it stays raised.
    public func raise() {
        registry_store_release(word, 1)
    }

    /// True once either side raised the flag.
    public var isRaised: Bool {
        registry_load_acquire(word) != 0
    }
}
