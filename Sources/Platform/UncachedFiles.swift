#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CLinuxFile

/// Files written past the page cache (Linux's `O_DIRECT`), in one place: a write of whole
/// aligned blocks goes from the caller's memory to the disk, costing no copy into the cache and
/// leaving no dirty pages for the kernel to write back later.
public enum UncachedFiles {
    /// What a write past the cache must be aligned to: its buffer's address, its offset and its
    /// length. 4 KiB covers the logical blocks of the disks Linux serves (512 B or 4 KiB).
    public static let alignment = 4096

    /// The open flag that makes a descriptor bypass the cache, as `/proc/self/fdinfo` shows it
    /// (0 where there is none).
    public static var openFlag: Int {
        #if os(Linux)
        return Int(registry_o_direct())
        #else
        return 0
        #endif
    }

    /// Opens `path` read-write (created with `mode` when `create`) so that aligned writes skip
    /// the page cache. Nil, with `errno` set, when the file system does not offer that (tmpfs
    /// before Linux 6.6, or any platform but Linux): open it as usual instead.
    public static func open(_ path: String, create: Bool, mode: mode_t) -> Int32? {
        #if os(Linux)
        let descriptor = registry_open_direct(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), UInt32(mode))
        return descriptor >= 0 ? descriptor : nil
        #else
        errno = EINVAL
        return nil
        #endif
    }

    /// From now on, `descriptor`'s writes of any alignment go through the page cache. False when
    /// the call failed (`errno` says why).
    public static func stopBypassingCache(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        guard flags >= 0 else { return false }
        guard Int(flags) & openFlag != 0 else { return true }
        return fcntl(descriptor, F_SETFL, flags & ~Int32(openFlag)) == 0
    }

    /// True while `descriptor`'s aligned writes skip the page cache (its O_DIRECT flag is set).
    public static func isBypassingCache(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        return flags >= 0 && Int(flags) & openFlag != 0
    }

    /// True when a write of `count` bytes from `address` at `offset` may go past the cache.
    public static func isAligned(_ address: UnsafeRawPointer, offset: Int, count: Int) -> Bool {
        (Int(bitPattern: address) | offset | count) & (alignment - 1) == 0
    }
}
