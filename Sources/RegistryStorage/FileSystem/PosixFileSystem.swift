import Platform

/// The real disk, through POSIX calls.
public struct PosixFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle {
        let descriptor = Platform.open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0o600)
        guard descriptor >= 0 else { throw Self.error(path, "open") }
        return FileHandle(path: path, number: descriptor)
    }

    /// O_DIRECT where the file system offers it, else a plain open.
    public func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle {
        if let descriptor = UncachedFiles.open(path, create: true, mode: 0o600) {
            return FileHandle(path: path, number: descriptor, openedBypassingCache: true)
        }
        guard errno == EINVAL else { throw Self.error(path, "open") }
        return try open(path, create: true)
    }

    /// On a handle that bypasses the cache, a write that is not aligned first turns the bypass off
    /// for good (O_DIRECT would refuse it), and so does a write the file system refuses with
    /// EINVAL (a file system may accept O_DIRECT at open and not for every write): the write is
    /// then made through the cache.
    public func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
        guard bytes.count > 0 else { return }
        if file.openedBypassingCache, !UncachedFiles.isAligned(bytes.baseAddress!, offset: offset, count: bytes.count) {
            try stopBypassingCache(file)
        }
        var done = 0
        var mayRetryThroughCache = file.openedBypassingCache
        while done < bytes.count {
            let written = pwrite(file.number, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if written < 0 {
                if errno == EINTR { continue }
                if errno == EINVAL, mayRetryThroughCache {
                    mayRetryThroughCache = false
                    try stopBypassingCache(file)
                    continue
                }
                throw Self.error(file.path, "write")
            }
            done += written
        }
    }

    public func isBypassingCache(_ file: FileHandle) -> Bool {
        file.openedBypassingCache && UncachedFiles.isBypassingCache(file.number)
    }

    private func stopBypassingCache(_ file: FileHandle) throws(StorageError) {
        guard UncachedFiles.stopBypassingCache(file.number) else { throw Self.error(file.path, "fcntl (clearing O_DIRECT)") }
    }

    public func read(_ file: FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let done = try bytes.withUnsafeMutableBytes { raw in
            Result { () throws(StorageError) in try read(file, at: offset, into: raw) }
        }.get()
        bytes.removeLast(count - done)
        return bytes
    }

    public func read(_ file: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int {
        var done = 0
        while done < buffer.count {
            let got = pread(file.number, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if got < 0 {
                if errno == EINTR { continue }
                throw Self.error(file.path, "read")
            }
            if got == 0 { break }
            done += got
        }
        return done
    }

    public func size(_ file: FileHandle) throws(StorageError) -> Int {
        var status = stat()
        guard fstat(file.number, &status) == 0 else { throw Self.error(file.path, "fstat") }
        return Int(status.st_size)
    }

    public func sync(_ file: FileHandle) throws(StorageError) {
        guard fdatasync(file.number) == 0 else { throw Self.error(file.path, "fdatasync") }
    }

    public func close(_ file: FileHandle) {
        _ = Platform.close(file.number)
    }

    public func rename(_ source: String, to destination: String) throws(StorageError) {
        guard Platform.rename(source, destination) == 0 else { throw Self.error(source, "rename to \(destination)") }
    }

    public func remove(_ path: String) throws(StorageError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw Self.error(path, "unlink") }
    }

    public func list(_ directory: String) throws(StorageError) -> [String] {
        guard let stream = opendir(directory) else { throw Self.error(directory, "opendir") }
        defer { closedir(stream) }
        var names = [String]()
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    public func syncDirectory(_ directory: String) throws(StorageError) {
        let descriptor = Platform.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Self.error(directory, "open") }
        defer { _ = Platform.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Self.error(directory, "fsync") }
    }

    public func availableBytes(in directory: String) throws(StorageError) -> UInt64 {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { throw Self.error(directory, "statvfs") }
        return UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize)).partialValue
    }

    private static func error(_ path: String, _ call: String, errno code: Int32 = errno) -> StorageError {
        .io(path: path, reason: "\(call) failed: \(String(cString: strerror(code)))")
    }
}
