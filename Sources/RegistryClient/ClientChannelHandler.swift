import NIOCore
import RegistryWire

/// A request waiting to be written, with the promise its answer completes.
struct PendingRequest: Sendable {
    let body: ClientBody
    let promise: EventLoopPromise<ServerBody>
}

/// Numbers outgoing requests, matches answers by request ID, and fails every waiting request
/// when the connection ends or the server sends a connection-level error.
final class ClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = ByteBuffer

    private var nextRequestID: UInt64 = 1
    private var waiting: [UInt64: EventLoopPromise<ServerBody>] = [:]
    private var closedReason: RegistryClientError?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if let closedReason {
            request.promise.fail(closedReason)
            promise?.fail(closedReason)
            return
        }
        let id = nextRequestID
        nextRequestID += 1
        var buffer = context.channel.allocator.buffer(capacity: 128)
        do {
            try ClientFrame(requestID: id, body: request.body).encodeFrame(into: &buffer)
        } catch {
            request.promise.fail(RegistryClientError.unexpectedResponse("cannot encode request: \(error)"))
            promise?.succeed()
            return
        }
        waiting[id] = request.promise
        context.write(wrapOutboundOut(buffer), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame: ServerFrame
        do {
            frame = try ServerFrame(decoding: unwrapInboundIn(data))
        } catch {
            failAll(.unexpectedResponse("\(error)"))
            context.close(promise: nil)
            return
        }
        if let promise = waiting.removeValue(forKey: frame.requestID) {
            promise.succeed(frame.body)
        } else if case .error(let error) = frame.body {
            failAll(.server(error))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(.connectionClosed("the server closed the connection"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(.connectionClosed("\(error)"))
        context.close(promise: nil)
    }

    private func failAll(_ error: RegistryClientError) {
        closedReason = closedReason ?? error
        let promises = waiting.values
        waiting.removeAll()
        for promise in promises { promise.fail(error) }
    }
}
