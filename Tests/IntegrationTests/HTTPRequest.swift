import Foundation
import Platform

/// One HTTP/1.1 request over a plain socket to 127.0.0.1, answered with the status code and
/// body: enough for the metrics port, without a client library. `raw` sends those bytes instead
/// of a well-formed request.
func httpRequest(port: Int, method: String = "GET", path: String, raw: [UInt8]? = nil) throws -> (status: Int, body: String) {
    struct HTTPFailure: Error, CustomStringConvertible { let description: String }
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else { throw HTTPFailure(description: "cannot connect to 127.0.0.1:\(port)") }
    let request = raw ?? Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, 0) }) == request.count else {
        throw HTTPFailure(description: "short send")
    }
    var response = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count <= 0 { break }
        response += chunk[..<count]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)), let split = text.range(of: "\r\n\r\n") else {
        throw HTTPFailure(description: "not an HTTP response: \(text.prefix(80))")
    }
    return (status, String(text[split.upperBound...]))
}
