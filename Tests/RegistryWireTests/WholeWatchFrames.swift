import NIOCore

@testable import RegistryWire

extension WatchFrames {
    /// A whole frame of `eventFields` (runs of ``appendEventField(_:to:)``'s fields) and
    /// `cursorField` answering `requestID`, the parts one after the other, as a node's watch
    /// handler writes them to the socket.
    static func write(requestID: UInt64, eventFields: [ByteBuffer], cursorField: ByteBuffer?, into buffer: inout ByteBuffer) {
        let body = eventFields.reduce(cursorField?.readableBytes ?? 0) { $0 + $1.readableBytes }
        writeHead(requestID: requestID, bodyBytes: body, into: &buffer)
        for run in eventFields { buffer.writeImmutableBuffer(run) }
        if let cursorField { buffer.writeImmutableBuffer(cursorField) }
    }
}
