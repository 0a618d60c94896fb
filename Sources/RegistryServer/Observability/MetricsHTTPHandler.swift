import NIOCore
import NIOHTTP1

/// One HTTP/1.1 connection to the metrics port: reads requests, answers each through the
/// ``MetricsEndpoint``, keeps the connection alive when the client asks to. A request NIO's
/// decoder cannot parse gets 400 and the connection closes.
final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: MetricsEndpoint
    private var head: HTTPRequestHead?

    init(endpoint: MetricsEndpoint) {
        self.endpoint = endpoint
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request): head = request
        case .body: break
        case .end:
            guard let request = head else { return }
            head = nil
            let answer = endpoint.answer(MetricsRoute(method: request.method.rawValue, uri: request.uri))
            respond(context: context, answer, keepAlive: request.isKeepAlive, headOnly: request.method == .HEAD, version: request.version)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError else { return context.close(promise: nil) }
        endpoint.rejected("bad_request")
        let answer = MetricsEndpoint.Answer(status: .badRequest, contentType: "text/plain; charset=utf-8", body: "bad request\n")
        respond(context: context, answer, keepAlive: false, headOnly: false, version: .http1_1)
    }

    private func respond(
        context: ChannelHandlerContext, _ answer: MetricsEndpoint.Answer, keepAlive: Bool, headOnly: Bool, version: HTTPVersion
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: answer.contentType)
        headers.add(name: "Content-Length", value: "\(answer.body.utf8.count)")
        if answer.status == .methodNotAllowed { headers.add(name: "Allow", value: "GET, HEAD") }
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: answer.status, headers: headers))), promise: nil)
        if !headOnly {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: answer.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive { done.whenComplete { [channel = context.channel] _ in channel.close(promise: nil) } }
    }
}
