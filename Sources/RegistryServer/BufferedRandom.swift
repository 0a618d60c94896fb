import Platform
#if os(Linux)
import CLinuxFile
#endif

/// The system's cryptographic random source, read 4 KiB at a time (one `getrandom` system call on
/// Linux, `/dev/urandom` elsewhere): `SystemRandomNumberGenerator` makes one `getrandom` system
/// call per 64-bit word, which cost every device mint two system calls. Falls back to that
/// generator if the source cannot be read.
struct BufferedRandom: RandomNumberGenerator {
    private var words = [UInt64](repeating: 0, count: 512)
    private var position = 512

    mutating func next() -> UInt64 {
        if position == words.count { refill() }
        defer { position += 1 }
        return words[position]
    }

    private mutating func refill() {
        position = 0
        let filled = words.withUnsafeMutableBytes { Self.fill($0) }
        if !filled {
            var system = SystemRandomNumberGenerator()
            for index in words.indices { words[index] = system.next() }
        }
    }

    /// Fills `buffer` from the kernel's random source; false when it cannot.
    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Bool {
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
