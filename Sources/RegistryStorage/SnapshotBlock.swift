/// One block of a snapshot file (``SnapshotFile``) being filled with records: its bytes are the
/// block exactly as the file holds it, the head left blank until ``seal()`` fills it in.
///
/// ``SnapshotWriter`` fills one with the records it is given. A forked snapshot's child fills its
/// own and sends each one sealed, so the node has only to write them
/// (``SnapshotWriter/appendSealed(_:)``): the framing and the checksum are done in the child's
/// CPU time, not the node's.
public struct SnapshotBlock {
    /// The head (``SnapshotFile/blockHeaderBytes`` bytes, blank until sealed), then the records,
    /// each as `length u32 | bytes`.
    public private(set) var bytes: [UInt8]
    /// The records in the block.
    public private(set) var records: UInt32 = 0

    /// An empty block.
    public init() {
        bytes = []
        bytes.reserveCapacity(SnapshotFile.blockBytes + (64 << 10))
        reset()
    }

    /// True when the block holds no record.
    public var isEmpty: Bool { records == 0 }

    /// True once the records reach ``SnapshotFile/blockBytes``: the block is then sealed and
    /// written, and a new one begun.
    public var isFull: Bool { bytes.count - SnapshotFile.blockHeaderBytes >= SnapshotFile.blockBytes }

    /// Adds one record.
    public mutating func append(_ record: UnsafeRawBufferPointer) {
        ByteWriter.append(UInt32(record.count), to: &bytes)
        bytes.append(contentsOf: record)
        records += 1
    }

    /// Adds one record.
    public mutating func append(_ record: [UInt8]) {
        record.withUnsafeBytes { append($0) }
    }

    /// Fills in the head (magic, the records' length and count, their checksum) and returns the
    /// checksum; ``bytes`` is then the whole block.
    @discardableResult
    public mutating func seal() -> UInt64 {
        let head = SnapshotFile.blockHeaderBytes
        let checksum = bytes.withUnsafeBytes { JournalChecksum.of(UnsafeRawBufferPointer(rebasing: $0[head...]), seed: UInt64(records)) }
        let fields = (SnapshotFile.blockMagic.littleEndian, UInt32(bytes.count - head).littleEndian, records.littleEndian)
        bytes.withUnsafeMutableBytes { block in
            block.storeBytes(of: fields.0, toByteOffset: 0, as: UInt32.self)
            block.storeBytes(of: fields.1, toByteOffset: 4, as: UInt32.self)
            block.storeBytes(of: fields.2, toByteOffset: 8, as: UInt32.self)
            block.storeBytes(of: checksum.littleEndian, toByteOffset: 12, as: UInt64.self)
        }
        return checksum
    }

    /// Empties the block, keeping its memory, to fill it again.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: repeatElement(0, count: SnapshotFile.blockHeaderBytes))
        records = 0
    }
}
