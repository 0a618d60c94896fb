// The change feed's floor (bench/feed.sh): N watchers that do only the unavoidable work of a
// watcher. Each opens a TCP connection, says hello, sends one WatchRequest for every vendor, then
// reads the stream and throws the bytes away, decoding nothing, until it is killed. The server does all of its feed work for these watchers (the events
// packed, the frames written), so the throughput a node keeps with them, against none, is the
// most a watcher that decodes its events can hope for on the same machine.
//
// Usage: FeedFloor HOST PORT WATCHERS
import Foundation
import NIOCore
import Platform
import RegistryWire

let arguments = CommandLine.arguments
guard arguments.count == 4, let port = UInt16(arguments[2]), let count = Int(arguments[3]), count > 0 else {
    FileHandle.standardError.write(Data("usage: FeedFloor HOST PORT WATCHERS\n".utf8))
    exit(64)
}
let host = arguments[1]

func frameBytes(_ frame: ClientFrame) -> [UInt8] {
    var buffer = ByteBuffer()
    try! frame.encodeFrame(into: &buffer)
    return Array(buffer.readableBytesView)
}

/// A connected socket, or exit 69 naming why.
func connectSocket() -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(port.bigEndian)
    address.sin_addr.s_addr = inet_addr(host)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else {
        FileHandle.standardError.write(Data("FeedFloor: cannot connect to \(host):\(port)\n".utf8))
        exit(69)
    }
    return descriptor
}

let hello = frameBytes(ClientFrame(requestID: 1, body: .hello(Hello(role: .client, clientName: "feed-floor"))))
let watch = frameBytes(ClientFrame(requestID: 2, body: .watch(WatchRequestMessage())))
let descriptors = (0..<count).map { _ in connectSocket() }
for descriptor in descriptors {
    _ = (hello + watch).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}

// One thread reads every socket as it becomes readable, as an event loop would, until the
// node closes them all or the process is killed (SIGTERM's default action); then it prints the
// bytes read.
var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
var chunk = [UInt8](repeating: 0, count: 1 << 18)
var open = descriptors.count
var bytes = 0
while open > 0 {
    guard poll(&polled, nfds_t(polled.count), -1) > 0 else { continue }
    for index in polled.indices where polled[index].revents != 0 {
        let received = chunk.withUnsafeMutableBytes { recv(polled[index].fd, $0.baseAddress, $0.count, 0) }
        if received <= 0 {
            polled[index].fd = -1
            open -= 1
        } else {
            bytes += received
        }
    }
}
print(bytes)
