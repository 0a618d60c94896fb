#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#if os(Linux)
import CLinuxFile
#endif

/// Random bytes from the kernel's cryptographic source, the one place the project reads it
/// directly (`getrandom(2)` on Linux, `/dev/urandom` elsewhere); the standard library's
/// `SystemRandomNumberGenerator` serves callers that need a word at a time.
public enum KernelRandom {
    /// Fills `buffer` whole; false when the source cannot be read.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
        #if os(Linux)
        return fill(buffer) { registry_random_bytes($0, UInt($1)) }
        #else
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return fill(buffer) { read(fd, $0, $1) }
        #endif
    }

    /// Fills `buffer` by calling `readSome` (a `read`-like call) until it is full, retrying on
    /// EINTR; false at the first other failure or an empty read.
    private static func fill(
        _ buffer: UnsafeMutableRawBufferPointer, readSome: (UnsafeMutableRawPointer, Int) -> Int
    ) -> Bool {
        var done = 0
        while done < buffer.count {
            let got = readSome(buffer.baseAddress! + done, buffer.count - done)
            if got > 0 {
                done += got
            } else if got < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }
}
