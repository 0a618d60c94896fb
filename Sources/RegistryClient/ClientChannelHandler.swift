import NIOCore
import RegistryWire

/// Where a request's answer goes: an async caller's promise, or a callback that runs on the
/// connection's event loop (for callers that must not pay for a task per request).
enum AnswerSink: Sendable {
    case promise(EventLoopPromise<ServerBody>)
    case callback(@Sendable (Result<ServerBody, RegistryClientError>) -> Void)

    func succeed(_ body: ServerBody) {
        switch self {
        case .promise(let promise): promise.succeed(body)
        case .callback(let callback): callback(.success(body))
        }
    }

    func fail(_ error: RegistryClientError) {
        switch self {
        case .promise(let promise): promise.fail(error)
        case .callback(let callback): callback(.failure(error))
        }
    }
}

/// A request waiting to be written, with where its answer goes.
struct PendingRequest: Sendable {
    let body: ClientBody
    let answer: AnswerSink
}

/// Numbers outgoing requests, matches answers by request ID, and fails every waiting request
/// when the connection ends or the server sends a connection-level error.
final class ClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingRequest
    typealias OutboundOut = ByteBuffer

    private var nextRequestID: UInt64 = 1
    private var waiting: [UInt64: AnswerSink] = [:]
    private var closedReason: RegistryClientError?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        // Once a request reaches this handler, the handler alone answers it, so the write
        // promise succeeds here; a failed write promise means the handler never saw the request.
        promise?.succeed()
        if let closedReason {
            // Answered on a later turn of the loop, never from inside the caller's write: a
            // caller that sends again from its answer callback would otherwise recurse once per
            // request, without bound, on a connection that is gone.
            context.eventLoop.execute { request.answer.fail(closedReason) }
            return
        }
        let id = nextRequestID
        nextRequestID += 1
        var buffer = context.channel.allocator.buffer(capacity: 128)
        do {
            try ClientFrame(requestID: id, body: request.body).encodeFrame(into: &buffer)
        } catch {
            request.answer.fail(.unexpectedResponse("cannot encode request: \(error)"))
            return
        }
        waiting[id] = request.answer
        // A failed socket write closes the channel, and channelInactive fails every waiting request.
        context.write(wrapOutboundOut(buffer), promise: nil)
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
        if let answer = waiting.removeValue(forKey: frame.requestID) {
            answer.succeed(frame.body)
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
        let answers = waiting.values
        waiting.removeAll()
        for answer in answers { answer.fail(error) }
    }
}
