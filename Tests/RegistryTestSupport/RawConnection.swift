import Foundation
import Platform
import NIOCore
import RegistryWire

/// A blocking POSIX TCP connection for sending bytes no well-behaved client would.
public struct RawConnection: Sendable {
    public let descriptor: Int32

    public init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw POSIXError(.ECONNREFUSED) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    public func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Platform.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends what the socket takes now, without waiting; returns the bytes taken (0 when its
    /// buffer is full, or the connection failed).
    public func sendAvailable(_ bytes: UnsafeRawBufferPointer) -> Int {
        max(0, Platform.send(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)))
    }

    /// Waits up to `milliseconds` for the socket to take more bytes; false when it did not.
    public func waitWritable(milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
        return poll(&descriptor, 1, milliseconds) == 1
    }

    public func send(_ frame: ClientFrame) throws {
        var buffer = ByteBuffer()
        try frame.encodeFrame(into: &buffer)
        send(Array(buffer.readableBytesView))
    }

    public func sendHello() throws -> ServerFrame? {
        try send(ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: "raw"))))
        return readFrames().first
    }

    /// Reads whole frames until `count` arrived, the peer closed, or 5 s passed.
    /// `closed` tells whether the server closed the connection.
    public func readFrames(count: Int = 1) -> [ServerFrame] {
        readFramesAndClose(count: count).frames
    }

    public func readFramesAndClose(count: Int = .max) -> (frames: [ServerFrame], closed: Bool) {
        readAndClose(count: count) { try? ServerFrame(decoding: $0) }
    }

    /// Reads frames, decoded by `decode` (nil skips one), until `count` arrived, the peer closed,
    /// or 5 s passed.
    private func readAndClose<Frame>(count: Int, _ decode: (ByteBuffer) -> Frame?) -> (frames: [Frame], closed: Bool) {
        var buffer = ByteBuffer()
        var frames = [Frame]()
        let decoder = FrameDecoder(maxFrameBytes: 1 << 24)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while frames.count < count {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received <= 0 { return (frames, received == 0) }
            buffer.writeBytes(chunk[0..<received])
            while let payload = try? decoder.nextFrame(&buffer) {
                if let frame = decode(payload) { frames.append(frame) }
            }
        }
        return (frames, false)
    }

    /// Says hello as a peer: the client Hello with role peer, then `hello`; returns the node's
    /// answer to the client Hello.
    /// Says hello as a peer, then sends `hello` with the proof `sign` makes of the node's
    /// challenge (from its HelloAccepted).
    public func sendPeerHello(_ hello: PeerHello, sign: (UInt64) -> [UInt8] = { _ in [] }) throws -> ServerFrame? {
        try send(ClientFrame(requestID: 0, body: .hello(Hello(role: .peer, clientName: "raw-peer"))))
        let accepted = readFrames().first
        var signed = hello
        if case .helloAccepted(let answer) = accepted?.body { signed.proof = sign(answer.challenge) }
        try send(.hello(signed))
        return accepted
    }

    public func send(_ frame: PeerFrame) throws {
        var buffer = ByteBuffer()
        try frame.encodeFrame(into: &buffer)
        send(Array(buffer.readableBytesView))
    }

    /// Reads peer frames until `count` arrived, the node closed, or 5 s passed.
    public func readPeerFramesAndClose(count: Int = .max) -> (frames: [PeerFrame], closed: Bool) {
        readAndClose(count: count) { try? PeerFrame(decoding: $0) }
    }

    public func close() {
        Platform.close(descriptor)
    }
}
