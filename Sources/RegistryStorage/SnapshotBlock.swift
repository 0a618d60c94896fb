/// One block of a snapshot file (``SnapshotFile``) being filled with records: its bytes are the
/// block exactly as the file holds it, the head left blank until ``seal()`` fills it in.
///
/// ``SnapshotWriter`` fills one with the records it is given. A forked snapshot's child fills its
/// own and sends each one sealed, so the node has only to write them
/// (``SnapshotWriter/appendSealed(_:)``): the framing and the checksum are done in the child's
/// CPU time, not the node's.
public struct SnapshotBlock {
    /// The head (``SnapshotFile/blockHeaderBytes`` bytes, blank until sealed), then the records,
    /// each as `length u32 | bytes`, in the first ``byteCount`` bytes; the rest is room for the
    /// records to come, written in place (``append(recordBytes:writing:)``).
    private var storage: [UInt8]
    /// The bytes of the block so far: its head and its records.
    public private(set) var byteCount = SnapshotFile.blockHeaderBytes
    /// The records in the block.
    public private(set) var records: UInt32 = 0

    /// An empty block.
    public init() {
        storage = [UInt8](repeating: 0, count: SnapshotFile.blockHeaderBytes + SnapshotFile.blockBytes + (64 << 10))
    }

    /// True when the block holds no record.
    public var isEmpty: Bool { records == 0 }

    /// True once the records reach ``SnapshotFile/blockBytes``: the block is then sealed and
    /// written, and a new one begun.
    public var isFull: Bool { byteCount - SnapshotFile.blockHeaderBytes >= SnapshotFile.blockBytes }

    /// The block's bytes, a copy: the whole block, as the file holds it, once sealed.
    public var bytes: [UInt8] { Array(storage[..<byteCount]) }

    /// Calls `body` with the block's bytes (see ``bytes``), without copying them.
    public func withUnsafeBytes<Value, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Value
    ) throws(Failure) -> Value {
        // Through a Result: the array's own withUnsafeBytes rethrows untyped errors.
        try storage.withUnsafeBytes { raw in
            Result { () throws(Failure) in try body(UnsafeRawBufferPointer(rebasing: raw[..<byteCount])) }
        }.get()
    }

    /// Adds one record.
    public mutating func append(_ record: UnsafeRawBufferPointer) {
        append(recordBytes: record.count) { target in
            if let source = record.baseAddress { target.copyMemory(from: source, byteCount: record.count) }
        }
    }

    /// Adds one record.
    public mutating func append(_ record: [UInt8]) {
        record.withUnsafeBytes { append($0) }
    }

    /// Adds one record of `size` bytes, which `write` writes from the address it is given: a
    /// record encoded straight into the block, with no buffer of its own to copy from.
    public mutating func append(recordBytes size: Int, writing write: (UnsafeMutableRawPointer) -> Void) {
        precondition(size >= 0 && size <= Int(UInt32.max), "a snapshot record of \(size) bytes")
        let start = byteCount
        let end = start + 4 + size
        if end > storage.count { storage.append(contentsOf: repeatElement(0, count: end - storage.count)) }
        storage.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(size).littleEndian, toByteOffset: start, as: UInt32.self)
            write(raw.baseAddress! + start + 4)
        }
        byteCount = end
        records += 1
    }

    /// Fills in the head (magic, the records' length and count, their checksum) and returns the
    /// checksum; ``bytes`` is then the whole block.
    @discardableResult
    public mutating func seal() -> UInt64 {
        let head = SnapshotFile.blockHeaderBytes
        let count = byteCount
        let checksum = storage.withUnsafeBytes { JournalChecksum.of(UnsafeRawBufferPointer(rebasing: $0[head..<count]), seed: UInt64(records)) }
        let fields = (SnapshotFile.blockMagic.littleEndian, UInt32(count - head).littleEndian, records.littleEndian)
        storage.withUnsafeMutableBytes { block in
            block.storeBytes(of: fields.0, toByteOffset: 0, as: UInt32.self)
            block.storeBytes(of: fields.1, toByteOffset: 4, as: UInt32.self)
            block.storeBytes(of: fields.2, toByteOffset: 8, as: UInt32.self)
            block.storeBytes(of: checksum.littleEndian, toByteOffset: 12, as: UInt64.self)
        }
        return checksum
    }

    /// Empties the block, keeping its memory, to fill it again. The head is blank again: every
    /// byte of it is written by the next ``seal()``.
    public mutating func reset() {
        storage.withUnsafeMutableBytes { _ = $0[..<SnapshotFile.blockHeaderBytes].initializeMemory(as: UInt8.self, repeating: 0) }
        byteCount = SnapshotFile.blockHeaderBytes
        records = 0
    }
}
