/// Little-endian appends to a byte array.
enum ByteWriter {
    static func append<Value: FixedWidthInteger>(_ value: Value, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Little-endian reads from a buffer; reading past its end throws ``StorageError/corrupt(_:)``
/// with the message the caller gave.
struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    private let endMessage: String
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer, endMessage: String) {
        self.bytes = bytes
        self.endMessage = endMessage
    }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { remaining == 0 }

    mutating func read<Value: FixedWidthInteger>(_: Value.Type) throws(StorageError) -> Value {
        let raw = try self.bytes(MemoryLayout<Value>.size)
        return Value(littleEndian: raw.loadUnaligned(as: Value.self))
    }

    mutating func bytes(_ count: Int) throws(StorageError) -> UnsafeRawBufferPointer {
        guard count <= remaining else { throw .corrupt(endMessage) }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }
}
