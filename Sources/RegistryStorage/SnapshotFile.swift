/// A snapshot of a node's state on disk, as bytes: a header holding the caller's metadata (what
/// the snapshot covers), then the caller's records packed into checksummed blocks of about a
/// megabyte, then a trailer that counts them. It is written under a temporary name, synced, and
/// renamed into place, so a crash leaves either no new snapshot or a whole one; a reader checks
/// every checksum and the trailer, so a damaged or truncated file is refused, never half read.
/// Blocks are read one at a time, so reading (or sending one to a peer) takes bounded memory.
///
/// Layout, little-endian. Header: `magic u32 | format u32 | metadata length u32 | checksum u64 |
/// metadata`. Block: `magic u32 | payload length u32 | records u32 | checksum u64 | payload`, the
/// payload being records as `length u32 | bytes`. Trailer: `magic u32 | blocks u64 | records u64
/// | checksum u64`, the checksum chaining every block's.
public enum SnapshotFile {
    static let headerMagic: UInt32 = 0x3153_5252  // "RRS1"
    static let blockMagic: UInt32 = 0x4253_5252  // "RRSB"
    static let trailerMagic: UInt32 = 0x5453_5252  // "RRST"
    static let format: UInt32 = 1
    /// A block is written once its records reach this many bytes.
    public static let blockBytes = 1 << 20
    /// The bytes of a block's head.
    public static let blockHeaderBytes = 20
    /// The longest block a reader accepts: no block comes near it, so a longer one means the
    /// bytes are damaged or out of step.
    public static let largestBlock = 64 << 20

    /// The file name of the snapshot labelled `label` (for a node, the operations it covers), so
    /// that names sort as labels do.
    public static func name(label: UInt64) -> String {
        let digits = String(label)
        return "snapshot-" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".snap"
    }

    /// The labels of the snapshots in `directory`, newest (highest) first; temporary files of
    /// unfinished snapshots are not snapshots.
    public static func labels(in directory: String, on fs: some FileSystem) throws(StorageError) -> [UInt64] {
        try fs.list(directory).compactMap { name -> UInt64? in
            guard name.hasPrefix("snapshot-"), name.hasSuffix(".snap") else { return nil }
            return UInt64(name.dropFirst("snapshot-".count).dropLast(".snap".count))
        }.sorted(by: >)
    }

    /// The metadata in the header of the snapshot at `path`, checked against its checksum, without
    /// reading the rest.
    public static func readMetadata(_ path: String, on fs: some FileSystem) throws(StorageError) -> [UInt8] {
        let file = try fs.open(path, create: false)
        defer { fs.close(file) }
        return try readHeader(file, path: path, on: fs)
    }

    /// Whether the file at `path` is a snapshot in a format this version does not read: another
    /// version wrote it (a rollback, say). It is not damaged, and is left where it is.
    public static func isAnotherVersions(_ path: String, on fs: some FileSystem) -> Bool {
        guard let file = try? fs.open(path, create: false) else { return false }
        defer { fs.close(file) }
        guard let header = try? fs.read(file, at: 0, count: 8), header.count == 8 else { return false }
        let (magic, format) = header.withUnsafeBytes {
            (UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)), UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
        }
        return magic == headerMagic && format != Self.format
    }

    /// The header's metadata, its magic, format and checksum checked; it ends at byte 20 plus
    /// its length.
    private static func readHeader(_ file: FileHandle, path: String, on fs: some FileSystem) throws(StorageError) -> [UInt8] {
        func corrupt(_ what: String) -> StorageError { .corrupt("snapshot \(path): \(what)") }
        let header = try fs.read(file, at: 0, count: 20)
        guard header.count == 20 else { throw corrupt("it ends inside its header (truncated)") }
        let (magic, format, length, checksum) = header.withUnsafeBytes {
            (UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)), UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self)),
             Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self))),
             UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 12, as: UInt64.self)))
        }
        guard magic == headerMagic else { throw corrupt("it is not a snapshot (bad magic)") }
        guard format == Self.format else { throw corrupt("format \(format) is not one this version reads (\(Self.format))") }
        guard length <= largestBlock else { throw corrupt("its header claims \(length) bytes of metadata") }
        let meta = try fs.read(file, at: 20, count: length)
        guard meta.count == length else { throw corrupt("it ends inside its header (truncated)") }
        guard meta.withUnsafeBytes({ JournalChecksum.of($0, seed: UInt64(headerMagic)) }) == checksum else {
            throw corrupt("its header's checksum does not match")
        }
        return meta
    }

    /// Reads the snapshot at `path`: `metadata` gets the header's bytes, then `record` each
    /// record's, in order. Throws ``StorageError/corrupt(_:)`` naming the file and what is wrong
    /// when any checksum fails or the file ends before its trailer.
    public static func read(
        _ path: String, on fs: some FileSystem, metadata: ([UInt8]) throws(StorageError) -> Void,
        record: (UnsafeRawBufferPointer) throws(StorageError) -> Void
    ) throws(StorageError) {
        let file = try fs.open(path, create: false)
        defer { fs.close(file) }
        let size = try fs.size(file)
        func corrupt(_ what: String) -> StorageError { .corrupt("snapshot \(path): \(what)") }
        let meta = try readHeader(file, path: path, on: fs)
        try metadata(meta)
        // Blocks, then the trailer.
        var offset = 20 + meta.count
        var (blocks, records, chain): (UInt64, UInt64, UInt64) = (0, 0, 0)
        while true {
            let head = try fs.read(file, at: offset, count: blockHeaderBytes)
            guard head.count >= 4 else { throw corrupt("it ends after \(blocks) blocks, before its trailer (truncated)") }
            let kind = head.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            if kind == trailerMagic {
                guard head.count == blockHeaderBytes else { throw corrupt("its trailer is cut short (truncated)") }
                let (countedBlocks, countedRecords) = head.withUnsafeBytes {
                    (UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 4, as: UInt64.self)),
                     UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 12, as: UInt64.self)))
                }
                let trailerChecksum = try fs.read(file, at: offset + blockHeaderBytes, count: 8)
                guard trailerChecksum.count == 8 else { throw corrupt("its trailer is cut short (truncated)") }
                let expected = trailerChecksum.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                guard countedBlocks == blocks, countedRecords == records, expected == Self.seal(chain: chain, blocks: blocks, records: records) else {
                    throw corrupt("its trailer counts \(countedBlocks) blocks and \(countedRecords) records, \(blocks) and \(records) were read")
                }
                guard offset + blockHeaderBytes + 8 == size else { throw corrupt("bytes follow its trailer") }
                return
            }
            guard head.count == blockHeaderBytes, let blockHead = head.withUnsafeBytes({ BlockHead($0) }) else {
                throw corrupt("block \(blocks) at byte \(offset) is damaged or cut short")
            }
            let (payloadLength, count, blockChecksum) = (blockHead.payloadLength, blockHead.records, blockHead.checksum)
            guard payloadLength <= largestBlock else { throw corrupt("block \(blocks) claims \(payloadLength) bytes") }
            let payload = try fs.read(file, at: offset + blockHeaderBytes, count: payloadLength)
            guard payload.count == payloadLength else { throw corrupt("block \(blocks) is cut short (truncated)") }
            try payload.withUnsafeBytes { raw in
                Result { () throws(StorageError) in
                    guard JournalChecksum.of(raw, seed: UInt64(count)) == blockChecksum else {
                        throw corrupt("block \(blocks)'s checksum does not match")
                    }
                    var reader = ByteReader(raw, endMessage: "snapshot \(path): block \(blocks) ends inside a record")
                    for _ in 0..<count {
                        let recordLength = Int(try reader.read(UInt32.self))
                        try record(try reader.bytes(recordLength))
                    }
                    guard reader.isAtEnd else { throw corrupt("block \(blocks) has bytes after its records") }
                }
            }.get()
            chain = Self.chain(chain, blockChecksum)
            blocks += 1
            records += UInt64(count)
            offset += blockHeaderBytes + payloadLength
        }
    }

    /// A block's head (see the layout above): what follows it and its checksum.
    public struct BlockHead {
        /// The bytes of records after the head.
        public let payloadLength: Int
        /// How many records they are.
        public let records: UInt32
        /// Their checksum, seeded with their count.
        public let checksum: UInt64

        /// The head at the start of `bytes`; nil unless they start with a block's magic and hold
        /// a whole head.
        public init?(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count >= SnapshotFile.blockHeaderBytes,
                UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) == SnapshotFile.blockMagic
            else { return nil }
            payloadLength = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
            records = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
            checksum = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 12, as: UInt64.self))
        }
    }

    static func chain(_ chain: UInt64, _ checksum: UInt64) -> UInt64 {
        withUnsafeBytes(of: (chain ^ checksum).littleEndian) { JournalChecksum.of($0, seed: 0x5353) }
    }

    static func seal(chain: UInt64, blocks: UInt64, records: UInt64) -> UInt64 {
        withUnsafeBytes(of: (chain, blocks, records)) { JournalChecksum.of($0, seed: UInt64(trailerMagic)) }
    }
}

/// Writes one snapshot (see ``SnapshotFile``): records go into blocks as they come, so the
/// writer holds one block at most; ``finish()`` makes it durable under its name.
public final class SnapshotWriter {
    private let fs: any FileSystem
    private let directory: String
    private let path: String
    private let temporary: String
    private let file: FileHandle
    /// Every byte of the file goes through it, past the page cache where the disk allows.
    private let output: ChunkedFileWriter
    private var block = SnapshotBlock()
    private var blocks: UInt64 = 0
    private var records: UInt64 = 0
    private var chain: UInt64 = 0
    private var finished = false

    /// Starts snapshot `label` in `directory`, its header holding `metadata`.
    public init(fs: any FileSystem, directory: String, label: UInt64, metadata: [UInt8]) throws(StorageError) {
        self.fs = fs
        self.directory = directory
        self.path = directory + "/" + SnapshotFile.name(label: label)
        self.temporary = path + ".tmp"
        try fs.remove(temporary)
        file = try fs.openBypassingCache(temporary)
        output = ChunkedFileWriter(fs: fs, file: file)
        var header = [UInt8]()
        ByteWriter.append(SnapshotFile.headerMagic, to: &header)
        ByteWriter.append(SnapshotFile.format, to: &header)
        ByteWriter.append(UInt32(metadata.count), to: &header)
        ByteWriter.append(metadata.withUnsafeBytes { JournalChecksum.of($0, seed: UInt64(SnapshotFile.headerMagic)) }, to: &header)
        header += metadata
        try output.append(header)
    }

    deinit {
        if !finished {
            fs.close(file)
            try? fs.remove(temporary)
        }
    }

    /// Adds one record.
    public func append(_ record: UnsafeRawBufferPointer) throws(StorageError) {
        block.append(record)
        if block.isFull { try writeBlock() }
    }

    /// Adds one record of `size` bytes, written in place by `write` (``SnapshotBlock/append(recordBytes:writing:)``).
    public func append(recordBytes size: Int, writing write: (UnsafeMutableRawPointer) -> Void) throws(StorageError) {
        block.append(recordBytes: size, writing: write)
        if block.isFull { try writeBlock() }
    }

    /// Adds a whole block, sealed (``SnapshotBlock/seal()``), after the records appended so far.
    /// Its head is checked to announce exactly the bytes that follow it; its checksum is not
    /// checked here (the block comes from this node's own code, and every reader checks it).
    public func appendSealed(_ sealed: UnsafeRawBufferPointer) throws(StorageError) {
        guard let head = SnapshotFile.BlockHead(sealed), SnapshotFile.blockHeaderBytes + head.payloadLength == sealed.count else {
            throw .corrupt("snapshot \(path): a block of \(sealed.count) bytes whose head does not announce them")
        }
        if !block.isEmpty { try writeBlock() }
        try output.append(sealed)
        chain = SnapshotFile.chain(chain, head.checksum)
        blocks += 1
        records += UInt64(head.records)
    }

    /// Writes the last block and the trailer, syncs the file, renames it into place and syncs
    /// the directory; returns the path. Until it returns, no reader sees this snapshot.
    @discardableResult
    public func finish() throws(StorageError) -> String {
        if !block.isEmpty { try writeBlock() }
        var trailer = [UInt8]()
        ByteWriter.append(SnapshotFile.trailerMagic, to: &trailer)
        ByteWriter.append(blocks, to: &trailer)
        ByteWriter.append(records, to: &trailer)
        ByteWriter.append(SnapshotFile.seal(chain: chain, blocks: blocks, records: records), to: &trailer)
        try output.append(trailer)
        try output.finish()
        fs.close(file)
        finished = true
        try fs.rename(temporary, to: path)
        try fs.syncDirectory(directory)
        return path
    }

    /// The bytes written so far (for reporting the snapshot's size).
    public var bytesWritten: Int { output.bytesWritten }

    private func writeBlock() throws(StorageError) {
        let checksum = block.seal()
        try block.withUnsafeBytes { (bytes) throws(StorageError) in try output.append(bytes) }
        chain = SnapshotFile.chain(chain, checksum)
        blocks += 1
        records += UInt64(block.records)
        block.reset()
    }
}
