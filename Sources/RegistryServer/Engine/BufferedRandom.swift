import Platform

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
        let filled = words.withUnsafeMutableBytes { KernelRandom.fill($0) }
        if !filled {
            var system = SystemRandomNumberGenerator()
            for index in words.indices { words[index] = system.next() }
        }
    }
}
