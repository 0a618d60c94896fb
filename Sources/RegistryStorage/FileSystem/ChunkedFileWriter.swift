import Platform

/// Writes one new file front to back in whole chunks whose memory, offsets and lengths are
/// aligned (``UncachedFiles/alignment``), on a handle from ``FileSystem/openBypassingCache(_:)``:
/// where the file system allows it they go to the disk past the page cache, so that a snapshot
/// of gigabytes costs its node no copy into the cache, no page-cache pages to allocate, and no
/// write-back of them later while the journal's commits wait for the same disk
/// (docs/performance.md, "Writing snapshots past the page cache"). Only the last chunk, partly
/// filled, goes through the cache.
///
/// While the handle does not bypass the cache (``FileSystem/isBypassingCache(_:)``: the file
/// system refused it at the open or at a write), the file is synced every ``syncEveryBytes``, so
/// that its write-back goes to the disk a little at a time instead of piling up in the page cache
/// until the kernel flushes a gigabyte at once.
///
/// Only what ``finish()`` syncs is sure to be durable. Used from one thread at a time.
public final class ChunkedFileWriter {
    /// Bytes of one write: large enough that a write's cost is the disk's, small enough to keep.
    public static let chunkBytes = 1 << 20
    /// How often a file written through the cache is synced.
    public static let syncEveryBytes = 8 << 20

    private let fs: any FileSystem
    private let file: FileHandle
    private let chunk: UnsafeMutableRawBufferPointer
    /// Bytes of `chunk` filled.
    private var filled = 0
    /// Bytes handed to the file: whole chunks, so an aligned offset.
    private var offset = 0
    /// Bytes written through the cache since the file was last synced.
    private var unsynced = 0

    /// Writes `file` from its start; `fs` is the file system that opened it.
    public init(fs: any FileSystem, file: FileHandle) {
        self.fs = fs
        self.file = file
        chunk = .allocate(byteCount: Self.chunkBytes, alignment: UncachedFiles.alignment)
    }

    deinit { chunk.deallocate() }

    /// The bytes appended so far.
    public var bytesWritten: Int { offset + filled }

    /// Appends `bytes`; every chunk they fill is written.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        var rest = bytes
        while !rest.isEmpty {
            let step = min(rest.count, Self.chunkBytes - filled)
            (chunk.baseAddress! + filled).copyMemory(from: rest.baseAddress!, byteCount: step)
            filled += step
            rest = UnsafeRawBufferPointer(rebasing: rest[step...])
            if filled == Self.chunkBytes { try writeChunk() }
        }
    }

    /// Appends `bytes` (``append(_:)-(UnsafeRawBufferPointer)``).
    public func append(_ bytes: [UInt8]) throws(StorageError) {
        try bytes.withUnsafeBytes { raw in Result { () throws(StorageError) in try append(raw) } }.get()
    }

    /// Writes what is left and syncs the file: everything appended is durable when it returns.
    public func finish() throws(StorageError) {
        if filled > 0 { try writeChunk() }
        try fs.sync(file)
    }

    private func writeChunk() throws(StorageError) {
        try fs.write(file, UnsafeRawBufferPointer(rebasing: chunk[..<filled]), at: offset)
        offset += filled
        guard !fs.isBypassingCache(file) else {
            filled = 0
            return
        }
        unsynced += filled
        filled = 0
        if unsynced >= Self.syncEveryBytes {
            try fs.sync(file)
            unsynced = 0
        }
    }
}
