import CRegistryProto
import NIOCore

/// Watch frames built around events packed once: a node that sends one event to many watchers
/// packs it once (``packed(_:)``) and writes each watcher's frame around the packed bytes
/// (``write(requestID:events:cursor:into:)``), byte for byte what packing the whole
/// `ServerFrame` would give.
public enum WatchFrames {
    /// `event` as a packed `registry.v1.WatchEvent`.
    public static func packed(_ event: WatchEventMessage) throws(CodecError) -> ByteBuffer {
        let arena = CArena()
        let message = WatchCodec.event(event, in: arena)
        try arena.refuseTextWithNUL()
        var buffer = ByteBufferAllocator().buffer(capacity: 192)
        try withExtendedLifetime(arena) { () throws(CodecError) in try ProtobufC.pack(message, into: &buffer) }
        return buffer
    }

    /// Writes a length-prefixed `ServerFrame` answering `requestID` whose body is `WatchEvents`
    /// of `events` (each as ``packed(_:)`` made it) and `cursor`.
    public static func write(requestID: UInt64, events: [ByteBuffer], cursor: WatchCursor?, into buffer: inout ByteBuffer) throws(CodecError) {
        var packedCursor: ByteBuffer?
        if let cursor {
            let arena = CArena()
            let message = WatchCodec.cursor(cursor, in: arena)!
            try arena.refuseTextWithNUL()
            var bytes = ByteBufferAllocator().buffer(capacity: 64 + 48 * cursor.positions.count)
            try withExtendedLifetime(arena) { () throws(CodecError) in try ProtobufC.pack(message, into: &bytes) }
            packedCursor = bytes
        }
        // WatchEvents: field 1 (each event), field 2 (the cursor), both length-delimited.
        var inner = 0
        for event in events { inner += 1 + varintSize(UInt64(event.readableBytes)) + event.readableBytes }
        if let packedCursor { inner += 1 + varintSize(UInt64(packedCursor.readableBytes)) + packedCursor.readableBytes }
        try buffer.writeFrame { (buffer) throws(CodecError) in
            // ServerFrame: request_id (field 1, left out when 0, as protobuf-c does), then
            // watch_events (field 13).
            if requestID != 0 {
                buffer.writeVarint(1 << 3)
                buffer.writeVarint(requestID)
            }
            buffer.writeVarint(13 << 3 | 2)
            buffer.writeVarint(UInt64(inner))
            for event in events {
                buffer.writeVarint(1 << 3 | 2)
                buffer.writeVarint(UInt64(event.readableBytes))
                buffer.writeImmutableBuffer(event)
            }
            if let packedCursor {
                buffer.writeVarint(2 << 3 | 2)
                buffer.writeVarint(UInt64(packedCursor.readableBytes))
                buffer.writeImmutableBuffer(packedCursor)
            }
        }
    }

    private static func varintSize(_ value: UInt64) -> Int {
        value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
    }
}

extension ByteBuffer {
    /// Writes `value` as a protobuf varint.
    fileprivate mutating func writeVarint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            writeInteger(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        writeInteger(UInt8(value))
    }
}
