// The change feed's reading floor, shared by bench/Benchmarks/WatchDecoding (its cost per event)
// and bench/FeedFloor --read (watchers of a node that do it to every frame they receive).

/// A walk over a `ServerFrame` of watch events that reads every field of the frame and of the
/// messages nested in it, by the wire format alone, and builds nothing: the least a watcher that
/// reads its events can do. It is written here, apart from the client library's decoding
/// (`ServerFrame(decoding:)`), which it bounds.
public enum WireWalk {
    /// Walks one `ServerFrame` payload (no length prefix). Returns a sum of what it read, so that
    /// no read can be left out by the compiler.
    public static func serverFrame(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        walk(bytes, depth: 0)
    }

    private static func walk(_ bytes: UnsafeRawBufferPointer, depth: Int) -> UInt64 {
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
                // ServerFrame > WatchEvents > WatchEvent > LogPosition: the messages nest three deep.
                let nested = (depth == 0 && key >> 3 == 13) || (depth == 1 && key >> 3 == 1) || (depth == 2 && key >> 3 == 2)
                sum &+= nested ? walk(field, depth: depth + 1) : UInt64(field.count) &+ UInt64(field.first ?? 0)
                offset += length
            }
        }
        return sum
    }
}
