#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Small files the kernel writes (`/proc`, `/sys`), read in one call.
enum KernelFile {
    /// The start of the file at `path`, `bytes` bytes at most; nil when it cannot be opened or
    /// read, or is empty.
    static func text(at path: String, upTo bytes: Int) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: bytes)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }
}
