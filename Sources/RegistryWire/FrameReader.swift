import NIOCore

/// The bytes a connection has read and not yet cut into frames, and the cutting: what every
/// handler that takes frames at its own pace (a server connection that stops reading while its
/// requests are in flight, a peer session, a peer link) keeps, instead of a `ByteToMessageHandler`
/// that hands frames on as fast as they come.
public struct FrameReader {
    private var unread: ByteBuffer
    private let decoder: FrameDecoder

    /// A reader of frames up to `maxFrameBytes`, starting with `alreadyRead` (bytes another
    /// handler read before this one took the connection over).
    public init(maxFrameBytes: Int, alreadyRead: ByteBuffer = ByteBuffer()) {
        decoder = FrameDecoder(maxFrameBytes: maxFrameBytes)
        unread = alreadyRead
    }

    /// Adds bytes the connection read.
    public mutating func append(_ bytes: inout ByteBuffer) {
        if unread.readableBytes == 0 {
            unread = bytes
        } else {
            unread.writeBuffer(&bytes)
        }
    }

    /// The next whole frame's payload, or nil until more bytes arrive. Call ``compact()`` once
    /// done taking frames for this read.
    public mutating func next() throws(FrameError) -> ByteBuffer? {
        try decoder.nextFrame(&unread)
    }

    /// Gives back the memory of frames already taken: at once when nothing is left, and once
    /// 64 KiB of them lie ahead of what is left (moving a partial frame's bytes costs a copy).
    public mutating func compact() {
        if unread.readableBytes == 0 {
            unread.clear()
        } else if unread.readerIndex > 1 << 16 {
            unread.discardReadBytes()
        }
    }

    /// Bytes held that no frame was cut from yet.
    public var bufferedBytes: Int { unread.readableBytes }

    /// Drops every whole frame left (requests a closed connection gave up on), then returns and
    /// forgets what is left: the start of a frame the stream ended inside, if any.
    public mutating func finish() -> Int {
        while (try? decoder.nextFrame(&unread)) != nil {}
        let partial = unread.readableBytes
        unread.clear()
        return partial
    }

    /// Hands over what is held and not yet cut (to the handler that takes the connection over),
    /// leaving nothing.
    public mutating func takeRest() -> ByteBuffer {
        defer { unread = ByteBuffer() }
        return unread
    }
}
