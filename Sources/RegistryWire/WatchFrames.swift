import CRegistryProto
import NIOCore

/// Watch frames assembled from parts packed once: a node that sends one event to many watchers
/// packs it once, as the field a `WatchEvents` message holds it in (``appendEventField(_:to:)``),
/// and writes each watcher's frame as a head (``writeHead(requestID:bodyBytes:into:)``), runs of
/// those fields, and the cursor's field (``cursorField(_:)``): byte for byte what packing the
/// whole `ServerFrame` would give (`WatchCodecTests` compares them).
public enum WatchFrames {
    /// `WatchEvents` field 2 (the cursor), length-delimited.
    private static let cursorKey: UInt8 = 2 << 3 | 2

    /// Appends `event` as `WatchEvents` holds it: field 1's key, the packed length, the packed
    /// `registry.v1.WatchEvent`. On a throw (text with a NUL, which no state holds) the buffer
    /// is as it was.
    public static func appendEventField(_ event: WatchEventMessage, to buffer: inout ByteBuffer) throws(CodecError) {
        if WatchEventWriter.holdsNUL(event) {
            throw .invalidField("a watch event holds a NUL byte, which a protobuf-c string field cannot carry")
        }
        let size = WatchEventWriter.size(event)
        let total = ProtobufWriter.delimitedSize(1, length: size)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
            let start = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var writer = ProtobufWriter(at: start)
            writer.header(1, length: size)
            WatchEventWriter.write(event, to: &writer)
            precondition(writer.cursor == start + total, "a watch event's size was misjudged")
            return total
        }
    }

    /// `cursor` as `WatchEvents` holds it: field 2's key, the packed length, the packed
    /// `registry.v1.WatchCursor`.
    public static func cursorField(_ cursor: WatchCursor) throws(CodecError) -> ByteBuffer {
        let arena = CArena()
        let message = WatchCodec.cursor(cursor, in: arena)!
        try arena.refuseTextWithNUL()
        var buffer = ByteBufferAllocator().buffer(capacity: 64 + 48 * cursor.positions.count)
        try withExtendedLifetime(arena) { () throws(CodecError) in try ProtobufC.packField(message, key: cursorKey, into: &buffer) }
        return buffer
    }

    /// Writes the start of a length-prefixed `ServerFrame` answering `requestID` whose body is a
    /// `WatchEvents` of `bodyBytes` bytes (event fields, then at most one cursor field), which
    /// follow it on the wire.
    public static func writeHead(requestID: UInt64, bodyBytes: Int, into buffer: inout ByteBuffer) {
        // ServerFrame: request_id (field 1, left out when 0, as protobuf-c does), then
        // watch_events (field 13).
        let frameBytes = ProtobufWriter.uint64Size(1, requestID) + ProtobufWriter.delimitedSize(13, length: bodyBytes)
        buffer.writeInteger(UInt32(frameBytes), endianness: .big)
        let headBytes = frameBytes - bodyBytes
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: headBytes) { out in
            var writer = ProtobufWriter(at: out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            writer.uint64(1, requestID)
            writer.header(13, length: bodyBytes)
            return headBytes
        }
    }
}
