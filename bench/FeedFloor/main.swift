// The change feed's floors (bench/feed.sh), programs that do only the unavoidable work:
//
// - `FeedFloor HOST PORT WATCHERS`: N watchers of a node that do only the unavoidable work of a
//   watcher. Each opens a TCP connection, says hello, sends one WatchRequest for every vendor,
//   then reads the stream and throws the bytes away, decoding nothing, until it is killed. The
//   node does all of its feed work for them (the events packed, the frames written), so the
//   throughput a node keeps with them, against none, is the most a watcher of a node on the same
//   machine can hope for.
// - `FeedFloor --read HOST PORT WATCHERS`: the same watchers, which also split the stream into
//   frames and walk every field of every event in them (bench/WireWalk), building nothing: the
//   least a watcher that reads its events does. The throughput a node keeps with them is the most
//   a watcher that decodes its events, as the client library does, can hope for on this machine.
// - `FeedFloor --transport EVENTS_PER_SECOND WATCHERS`: the transport alone, with no node: one
//   thread writes watch frames of real created events to N loopback TCP connections at
//   EVENTS_PER_SECOND each, as a node that did nothing else for its watchers would, and another
//   reads and discards them as the watchers above do. Run beside a node without watchers at 0.9 of
//   that node's rate, the rate the node keeps is what the machine leaves for registrations when
//   10 watchers' bytes cross it: when it is below 0.9, no node can keep 0.9 here.
//
// All run until killed (SIGTERM's default action).
import Foundation
import NIOCore
import Platform
import RegistryCore
import RegistryWire
import WireWalk

let usage = "usage: FeedFloor HOST PORT WATCHERS, FeedFloor --read HOST PORT WATCHERS, or FeedFloor --transport EVENTS_PER_SECOND WATCHERS\n"

/// Exits 64 with the usage.
func usageError() -> Never {
    FileHandle.standardError.write(Data(usage.utf8))
    exit(64)
}

var arguments = Array(CommandLine.arguments.dropFirst())
/// Whether the watchers walk every frame they read (`--read`).
let walksFrames = arguments.first == "--read"
if walksFrames { arguments.removeFirst() }
guard arguments.count == 3, let count = Int(arguments[2]), count > 0 else { usageError() }
/// Events a second to each watcher, in the transport floor; nil when watching a node.
let transportRate: Int?
let host: String
let port: UInt16
if arguments[0] == "--transport", !walksFrames {
    guard let rate = Int(arguments[1]), rate > 0 else { usageError() }
    (transportRate, host, port) = (rate, "127.0.0.1", 0)
} else {
    guard let given = UInt16(arguments[1]) else { usageError() }
    (transportRate, host, port) = (nil, arguments[0], given)
}

func frameBytes(_ frame: ClientFrame) -> [UInt8] {
    var buffer = ByteBuffer()
    try! frame.encodeFrame(into: &buffer)
    return Array(buffer.readableBytesView)
}

/// Fails with exit 69, naming `what` and the system's error.
func fail(_ what: String) -> Never {
    FileHandle.standardError.write(Data("FeedFloor: \(what): \(String(cString: strerror(errno)))\n".utf8))
    exit(69)
}

/// A socket connected to `port` of `host`, or exit 69 naming why.
func connectSocket(_ host: String, _ port: UInt16) -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(port.bigEndian)
    address.sin_addr.s_addr = inet_addr(host)
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard result == 0 else { fail("cannot connect to \(host):\(port)") }
    return descriptor
}

/// The watchers' sockets: connected to the node, which is sent a hello and a watch request on
/// each; or, for the transport floor, connected to a listener of this process's own, whose
/// accepted ends a thread writes watch frames to at `rate`.
func watcherSockets(rate: Int?) -> [Int32] {
    guard let rate else {
        let hello = frameBytes(ClientFrame(requestID: 1, body: .hello(Hello(role: .client, clientName: "feed-floor"))))
        let watch = frameBytes(ClientFrame(requestID: 2, body: .watch(WatchRequestMessage())))
        let descriptors = (0..<count).map { _ in connectSocket(host, port) }
        for descriptor in descriptors {
            _ = (hello + watch).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        return descriptors
    }
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, Int32(count)) == 0 && getsockname(listener, $0, &length) == 0 }
    }
    guard bound else { fail("cannot listen on 127.0.0.1") }
    let descriptors = (0..<count).map { _ in connectSocket("127.0.0.1", UInt16(bigEndian: address.sin_port)) }
    let senders = (0..<count).map { _ in
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else { fail("cannot accept a watcher") }
        return accepted
    }
    let frame = Transport.frame()
    guard DetachedThread.start(named: "feed-transport", { Transport.write(frame, eventsPerSecond: rate, to: senders) }) else { fail("cannot start a thread") }
    return descriptors
}

/// The transport floor's writer, on a thread of its own.
enum Transport {
    /// Events a frame holds.
    static let eventsPerFrame = 64

    /// A watch frame of `eventsPerFrame` created events, each as a node packs it: a vendor and an
    /// origin named as registryload's load and a node's are, and a random device ID.
    static func frame() -> [UInt8] {
        var random = SystemRandomNumberGenerator()
        var fields = ByteBuffer()
        for sequence in 1...UInt64(eventsPerFrame) {
            let event = WatchEventMessage(
                kind: 1, operation: LogPosition(origin: "node-d31c2f65", epoch: 1, sequence: 1_000_000 + sequence), hlc: 0x0194_0000_0000_0000 + sequence,
                vendor: "com.load\(random.next() % 100)", deviceIDText: UUIDText(uuid: UUID128(high: random.next(), low: random.next())))
            try! WatchFrames.appendEventField(event, to: &fields)
        }
        var frame = ByteBuffer()
        WatchFrames.writeHead(requestID: 2, bodyBytes: fields.readableBytes, into: &frame)
        frame.writeBuffer(&fields)
        return Array(frame.readableBytesView)
    }

    /// Writes `frame` to every socket of `descriptors`, as many frames a millisecond as keep each at
    /// `eventsPerSecond`, until a write fails.
    static func write(_ frame: [UInt8], eventsPerSecond: Int, to descriptors: [Int32]) {
        let start = SystemClock.monotonicNanos()
        var framesSent = 0
        while true {
            let due = Int((SystemClock.monotonicNanos() - start) / 1_000) * eventsPerSecond / 1_000_000 / eventsPerFrame
            if due > framesSent {
                for descriptor in descriptors {
                    for _ in framesSent..<due {
                        let written = frame.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        if written != frame.count { return }
                    }
                }
                framesSent = due
            }
            usleep(1_000)
        }
    }
}

let descriptors = watcherSockets(rate: transportRate)

/// What one watcher has read of its stream and not yet walked (`--read`): the start of a frame.
struct PartialFrames {
    var bytes = [UInt8](repeating: 0, count: 1 << 18)
    var filled = 0

    /// Walks every whole frame held (a 4-byte big-endian length, then a `ServerFrame`), and keeps
    /// the rest, moved to the front; makes room for a longer frame than fits. Returns the walks' sum.
    mutating func walkWholeFrames() -> UInt64 {
        var sum: UInt64 = 0
        var start = 0
        var needed = 0
        bytes.withUnsafeBytes { held in
            while filled - start >= 4 {
                let length = Int(held.loadUnaligned(fromByteOffset: start, as: UInt32.self).bigEndian)
                guard filled - start - 4 >= length else {
                    needed = 4 + length
                    break
                }
                sum &+= WireWalk.serverFrame(UnsafeRawBufferPointer(rebasing: held[(start + 4)..<(start + 4 + length)]))
                start += 4 + length
            }
        }
        if start > 0 {
            bytes.withUnsafeMutableBytes { held in
                held.baseAddress!.copyMemory(from: held.baseAddress! + start, byteCount: filled - start)
            }
            filled -= start
        }
        if needed > bytes.count { bytes += [UInt8](repeating: 0, count: needed - bytes.count) }
        return sum
    }
}

// One thread reads every socket as it becomes readable, as an event loop would, until the
// node closes them all or the process is killed (SIGTERM's default action); then it prints the
// bytes read (and, with --read, the walks' sum).
var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
var chunk = [UInt8](repeating: 0, count: 1 << 18)
var partial = descriptors.map { _ in PartialFrames() }
var open = descriptors.count
var bytes = 0
var walked: UInt64 = 0
while open > 0 {
    guard poll(&polled, nfds_t(polled.count), -1) > 0 else { continue }
    for index in polled.indices where polled[index].revents != 0 {
        let received: Int
        if walksFrames {
            let filled = partial[index].filled
            received = partial[index].bytes.withUnsafeMutableBytes { recv(polled[index].fd, $0.baseAddress! + filled, $0.count - filled, 0) }
            if received > 0 {
                partial[index].filled += received
                walked &+= partial[index].walkWholeFrames()
            }
        } else {
            received = chunk.withUnsafeMutableBytes { recv(polled[index].fd, $0.baseAddress, $0.count, 0) }
        }
        if received <= 0 {
            polled[index].fd = -1
            open -= 1
        } else {
            bytes += received
        }
    }
}
print(walksFrames ? "\(bytes) \(walked)" : "\(bytes)")
