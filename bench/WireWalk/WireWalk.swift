// The floor of reading a message: the change feed's, shared by bench/Benchmarks/WatchDecoding (its
// cost per event) and bench/FeedFloor --read (watchers of a node that do it to every frame they
// receive); and a peer's batch's, in bench/Benchmarks/BatchDecoding.

/// A walk over a message that reads every field of it and of the messages nested in it, by the
/// wire format alone (varints and length-delimited fields), and builds nothing: for a
/// `ServerFrame` of watch events, the least a watcher that reads its events can do. It is
/// written here, apart from the decoders it bounds (the client library's
/// `ServerFrame(decoding:)`, a node's `OperationDecoder`).
public enum WireWalk {
    /// Walks one `ServerFrame` payload (no length prefix). Returns a sum of what it read, so that
    /// no read can be left out by the compiler.
    public static func serverFrame(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        walk(bytes, messages: serverFrameMessages)
    }

    /// ServerFrame > WatchEvents > WatchEvent > LogPosition: the messages nest three deep. Made
    /// once, so that a walk allocates nothing.
    private static let serverFrameMessages: [[UInt64]] = [[13], [1], [2]]

    /// Walks one message of varint and length-delimited fields (the only kinds the messages it
    /// walks hold; a fixed-width field would be misread): every field read, and the fields
    /// `messages[depth]` names (by number) at each depth walked as messages themselves; every
    /// other length-delimited field is read as bytes (its length and first byte). Returns a sum
    /// of what it read.
    public static func walk(_ bytes: UnsafeRawBufferPointer, messages: [[UInt64]]) -> UInt64 {
        walk(bytes, messages: messages, depth: 0)
    }

    private static func walk(_ bytes: UnsafeRawBufferPointer, messages: [[UInt64]], depth: Int) -> UInt64 {
        var offset = 0
        var sum: UInt64 = 0
        func varint() -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count {
                let byte = bytes[offset]
                offset += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte < 0x80 { break }
                shift += 7
            }
            return value
        }
        while offset < bytes.count {
            let key = varint()
            if key & 7 == 0 {
                sum &+= varint()
            } else {
                let length = Int(varint())
                let field = UnsafeRawBufferPointer(rebasing: bytes[offset..<min(bytes.count, offset + length)])
                let nested = depth < messages.count && messages[depth].contains(key >> 3)
                sum &+= nested ? walk(field, messages: messages, depth: depth + 1) : UInt64(field.count) &+ UInt64(field.first ?? 0)
                offset += length
            }
        }
        return sum
    }
}
