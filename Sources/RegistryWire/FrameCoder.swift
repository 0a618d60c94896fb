import NIOCore

/// Why a byte stream could not be cut into frames. Both end the connection.
public enum FrameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The 4-byte length prefix announced more than the limit; refused before buffering the payload.
    case tooLarge(length: UInt32, limit: Int)
    /// The stream ended inside a frame.
    case truncated(bufferedBytes: Int)

    public var description: String {
        switch self {
        case .tooLarge(let length, let limit): return "frame of \(length) bytes exceeds the limit of \(limit) bytes"
        case .truncated(let buffered): return "connection closed inside a frame (\(buffered) bytes of it arrived)"
        }
    }
}

/// Cuts a TCP stream into payloads: a 4-byte big-endian length, then that many bytes. The
/// length is checked against `maxFrameBytes` as soon as the prefix arrives, before any of the
/// payload is waited for.
public struct FrameDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = ByteBuffer

    public static let lengthPrefixBytes = 4
    public let maxFrameBytes: Int

    public init(maxFrameBytes: Int) {
        self.maxFrameBytes = maxFrameBytes
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let payload = try nextFrame(&buffer) else { return .needMoreData }
        context.fireChannelRead(wrapInboundOut(payload))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws
        -> DecodingState
    {
        let state = try decode(context: context, buffer: &buffer)
        if state == .needMoreData, buffer.readableBytes > 0 {
            let buffered = buffer.readableBytes
            buffer.moveReaderIndex(forwardBy: buffered)
            throw FrameError.truncated(bufferedBytes: buffered)
        }
        return state
    }

    /// The next whole payload, or nil when more bytes are needed.
    public func nextFrame(_ buffer: inout ByteBuffer) throws(FrameError) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else { return nil }
        guard length <= maxFrameBytes else { throw .tooLarge(length: length, limit: maxFrameBytes) }
        guard buffer.readableBytes >= Self.lengthPrefixBytes + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: Self.lengthPrefixBytes)
        return buffer.readSlice(length: Int(length))
    }
}

extension ByteBuffer {
    /// Writes a length-prefixed frame whose payload `body` appends; the prefix is back-filled.
    public mutating func writeFrame<Failure: Error>(_ body: (inout ByteBuffer) throws(Failure) -> Void) throws(Failure) {
        let prefixIndex = writerIndex
        writeInteger(UInt32(0))
        do {
            try body(&self)
        } catch {
            moveWriterIndex(to: prefixIndex)
            throw error
        }
        let length = writerIndex - prefixIndex - FrameDecoder.lengthPrefixBytes
        setInteger(UInt32(length), at: prefixIndex, endianness: .big)
    }
}

extension ClientFrame {
    /// This frame with its length prefix.
    public func encodeFrame(into buffer: inout ByteBuffer) throws(CodecError) {
        try buffer.writeFrame { (buffer) throws(CodecError) in try encode(into: &buffer) }
    }
}

extension ServerFrame {
    /// This frame with its length prefix.
    public func encodeFrame(into buffer: inout ByteBuffer) throws(CodecError) {
        try buffer.writeFrame { (buffer) throws(CodecError) in try encode(into: &buffer) }
    }
}
