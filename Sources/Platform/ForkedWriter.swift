#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinuxFile

/// A copy of this process, made with fork(2), that writes one stream of bytes into a pipe for
/// the parent to read: the way to read a big in-memory structure as it was at one moment while
/// the parent goes on changing it. The kernel shares the memory between the two and copies only
/// the pages the parent writes afterwards, so the copy costs page tables at the fork and one page
/// a page written, not a second structure.
///
/// The child is the forking thread alone, in a process whose other threads are gone mid-step:
/// `body` must not take a lock another thread may have held (logging, dispatch, Foundation). It
/// holds no descriptor but the one it is given (and 0 to 2): a child that outlives a killed
/// parent keeps none of its sockets or files. glibc's fork makes `malloc` safe in the
/// child. The child runs at the forking thread's priority (`body` may lower it) and ends with
/// `_exit`, never returning into the caller.
///
/// When the parent ends, its end of the pipe closes and the child's next write ends the child
/// (`SIGPIPE`, or `EPIPE`). A child that stops writing is the parent's to end (``stop()``).
public struct ForkedWriter: Sendable {
    /// The child's process ID.
    public let pid: pid_t
    /// The pipe's reading end, the parent's to read and close (``close()``).
    public let output: Int32

    /// Why no child was made.
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Forks. In the child, runs `body` with the pipe's writing end and exits with 0 when it
    /// returns true, 1 otherwise; in the parent, returns the child. The caller holds whatever
    /// keeps the memory `body` reads from changing during the fork itself.
    public static func start(_ body: (_ input: Int32) -> Bool) -> Result<ForkedWriter, Failure> {
        var ends: [Int32] = [-1, -1]
        guard registry_pipe(&ends, 1 << 20) == 0 else { return .failure(Failure(description: "pipe: \(String(cString: strerror(errno)))")) }
        let pid = fork()
        if pid == 0 {
            // The child holds only its end of the pipe (and 0 to 2): were the parent killed, a
            // child still at work would otherwise keep the parent's listening socket, connections
            // and data directory lock until it ended, and a restarted node could neither bind nor
            // lock.
            Glibc.close(ends[0])
            _ = registry_close_descriptors_except(ends[1])
            signal(SIGPIPE, SIG_DFL)
            let succeeded = body(ends[1])
            _exit(succeeded ? 0 : 1)
        }
        Glibc.close(ends[1])
        guard pid > 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(ends[0])
            return .failure(Failure(description: "fork: \(reason)"))
        }
        return .success(ForkedWriter(pid: pid, output: ends[0]))
    }

    /// What one read of the child's stream gave.
    public enum ReadOutcome: Equatable, Sendable {
        /// This many bytes (more than 0).
        case bytes(Int)
        /// The stream ended: the child closed it, or ended.
        case end
        /// Nothing came for the time allowed.
        case silent
        case failed(String)
    }

    /// Reads what the child wrote into `buffer`, waiting up to `timeoutMillis` for something.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeoutMillis: Int32) -> ReadOutcome {
        var waiting = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&waiting, 1, timeoutMillis)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { return .failed("poll: \(String(cString: strerror(errno)))") }
            if ready == 0 { return .silent }
            let count = Glibc.read(output, buffer.baseAddress, buffer.count)
            if count > 0 { return .bytes(count) }
            if count == 0 { return .end }
            if errno == EINTR || errno == EAGAIN { continue }
            return .failed("read: \(String(cString: strerror(errno)))")
        }
    }

    /// Waits for the child to end; true when it exited with 0.
    public func wait() -> Bool {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return false }
        }
        // WIFEXITED and WEXITSTATUS, which Swift does not import.
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }

    /// Ends the child and waits for it.
    public func stop() {
        kill(pid, SIGKILL)
        _ = wait()
    }

    /// In the child: gives up its copy of the whole pages within `bytes` at `base`, so that the
    /// parent's next write to each of them takes the page back instead of copying it (the fork
    /// shares every page, and the first side to write one gets a copy of its own unless the other
    /// has let go). The child must not read them again: they read as zeros. Never call it in the
    /// parent, whose data it would erase.
    public static func dropPagesInChild(_ base: UnsafeMutableRawPointer, bytes: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: base) + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + bytes) & ~(page - 1)
        guard end > start else { return }
        _ = madvise(UnsafeMutableRawPointer(bitPattern: start), end - start, MADV_DONTNEED)
    }

    /// Closes the parent's reading end.
    public func close() {
        Glibc.close(output)
    }
}

/// The child's side of a ``ForkedWriter``: whole buffers written to the pipe. Once a write
/// fails, everything after is dropped and ``failed`` says so.
public struct PipeSink {
    private let descriptor: Int32
    public private(set) var failed = false

    public init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    /// Writes all of `bytes`, unless a write failed before; false when any write failed.
    @discardableResult
    public mutating func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Writes all of `bytes`, unless a write failed before; false when any write failed.
    @discardableResult
    public mutating func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var written = 0
        while !failed && written < bytes.count {
            let count = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
            if count < 0 && errno == EINTR { continue }
            if count > 0 { written += count } else { failed = true }
        }
        return !failed
    }
}
