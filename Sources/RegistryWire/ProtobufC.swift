import CProtobufC
import NIOCore

/// The two calls every top-level message goes through, written once.
enum ProtobufC {
    /// Packs `message` (a protobuf-c struct initialised by its `__init`) after the buffer's
    /// writer index, checking `pack` against `get_packed_size`.
    static func pack<Message>(_ message: UnsafeMutablePointer<Message>, into buffer: inout ByteBuffer) throws(CodecError) {
        let base = UnsafeMutableRawPointer(message).assumingMemoryBound(to: ProtobufCMessage.self)
        let size = protobuf_c_message_get_packed_size(base)
        let written = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { out in
            protobuf_c_message_pack(base, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard written == size else { throw .packSizeMismatch(expected: size, written: written) }
    }

    /// Packs `message` as a length-delimited field of an enclosing message: `key` (the field's
    /// number and wire type 2, one byte), the packed length as a varint, then the packed bytes.
    static func packField<Message>(_ message: UnsafeMutablePointer<Message>, key: UInt8, into buffer: inout ByteBuffer) throws(CodecError) {
        let base = UnsafeMutableRawPointer(message).assumingMemoryBound(to: ProtobufCMessage.self)
        let size = protobuf_c_message_get_packed_size(base)
        let head = 1 + ProtobufWriter.varintSize(UInt64(size))
        var written = 0
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: head + size) { out in
            let start = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            start.pointee = key
            var writer = ProtobufWriter(at: start + 1)
            writer.varint(UInt64(size))
            written = protobuf_c_message_pack(base, start + head)
            return head + written
        }
        guard written == size else { throw .packSizeMismatch(expected: size, written: written) }
    }

    /// Unpacks `bytes` with a generated `__unpack` function and hands the message to `body`.
    /// A NULL from protobuf-c is a typed `malformed` error. protobuf-c allocates the message
    /// from a ``CArena`` (one `malloc` per 4 KiB rather than one per string and sub-message),
    /// and the arena frees it all on every path.
    static func withUnpacked<Message, Result>(
        _ bytes: ByteBuffer, name: String,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<Message>?,
        _ body: (Message) throws(CodecError) -> Result
    ) throws(CodecError) -> Result {
        let arena = CArena()
        return try withExtendedLifetime(arena) { () throws(CodecError) -> Result in
            var allocator = ProtobufCAllocator(
                // protobuf-c allocates once per field and sub-message, hundreds of times for a
                // batch: borrowing the arena, which the closure's caller keeps alive, spares each
                // call a retain and a release. Sizes are recorded for CRead.string.
                alloc: { context, size in
                    Unmanaged<CArena>.fromOpaque(context!)._withUnsafeGuaranteedRef { $0.allocateRecordingSize(bytes: size) }
                },
                // The arena frees everything at once; protobuf-c's single frees (after a failed
                // unpack) have nothing to do.
                free: { _, _ in },
                allocator_data: Unmanaged.passUnretained(arena).toOpaque())
            let message = bytes.withUnsafeReadableBytes { raw -> UnsafeMutablePointer<Message>? in
                var empty: UInt8 = 0
                guard let base = raw.baseAddress, raw.count > 0 else { return unpack(&allocator, 0, &empty) }
                return unpack(&allocator, raw.count, base.assumingMemoryBound(to: UInt8.self))
            }
            guard let message else { throw .malformed(message: name, bytes: bytes.readableBytes) }
            return try body(message.pointee)
        }
    }
}
