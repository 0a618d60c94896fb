#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's cryptographic random source, read 4 KiB at a time from `/dev/urandom`:
/// `SystemRandomNumberGenerator` makes one `getrandom` system call per 64-bit word, which cost
/// every device mint two system calls. Falls back to that generator if the device cannot be read.
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
        let filled = words.withUnsafeMutableBytes { buffer -> Bool in
            let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var done = 0
            while done < buffer.count {
                let got = read(fd, buffer.baseAddress! + done, buffer.count - done)
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
        if !filled {
            var system = SystemRandomNumberGenerator()
            for index in words.indices { words[index] = system.next() }
        }
    }
}
