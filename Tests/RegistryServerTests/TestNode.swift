import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import RegistryClient
import RegistryCore
import RegistryWire
import ServiceLifecycle
@testable import RegistryServer

/// A real node in this process: engine on a temporary data directory, server on an ephemeral
/// loopback port, stopped by a graceful shutdown.
final class TestNode: Sendable {
    let engine: RegistryEngine
    let server: RegistryServer
    let group: ServiceGroup
    let runTask: Task<Void, any Error>
    let port: Int

    static func start(dataDirectory: String, configure: (inout NodeConfiguration) -> Void = { _ in }) async throws -> TestNode {
        var configuration = NodeConfiguration()
        configuration.dataDirectory = dataDirectory
        configuration.port = 0
        configuration.nodeID = try NodeID("node-test")
        configure(&configuration)
        var logger = Logger(label: "test-node")
        logger.logLevel = .warning
        let engine = try RegistryEngine(configuration: configuration, logger: logger)
        let server = RegistryServer(engine: engine, configuration: configuration, logger: logger)
        let group = ServiceGroup(services: [server], logger: logger)
        let task = Task { try await group.run() }
        for _ in 0..<500 {
            if let port = server.localAddress?.port { return TestNode(engine, server, group, task, port) }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw CancellationError()
    }

    private init(_ engine: RegistryEngine, _ server: RegistryServer, _ group: ServiceGroup, _ task: Task<Void, any Error>, _ port: Int) {
        self.engine = engine
        self.server = server
        self.group = group
        self.runTask = task
        self.port = port
    }

    var endpoint: Endpoint { Endpoint(host: "127.0.0.1", port: port) }

    func client(role: Role = .client, maxCoalesced: Int = RegistryClient.defaultMaxCoalesced) async throws -> RegistryClient {
        try await RegistryClient.connect(to: endpoint, role: role, clientName: "tests", maxCoalesced: maxCoalesced)
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await runTask.value
    }
}

/// A blocking POSIX TCP connection for sending bytes no well-behaved client would.
struct RawConnection {
    let descriptor: Int32

    init(port: Int) throws {
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

    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func send(_ frame: ClientFrame) throws {
        var buffer = ByteBuffer()
        try frame.encodeFrame(into: &buffer)
        send(Array(buffer.readableBytesView))
    }

    func sendHello() throws -> ServerFrame? {
        try send(ClientFrame(requestID: 0, body: .hello(Hello(role: .client, clientName: "raw"))))
        return readFrames().first
    }

    /// Reads whole frames until `count` arrived, the peer closed, or 5 s passed.
    /// `closed` tells whether the server closed the connection.
    func readFrames(count: Int = 1) -> [ServerFrame] {
        readFramesAndClose(count: count).frames
    }

    func readFramesAndClose(count: Int = .max) -> (frames: [ServerFrame], closed: Bool) {
        var buffer = ByteBuffer()
        var frames = [ServerFrame]()
        let decoder = FrameDecoder(maxFrameBytes: 1 << 24)
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while frames.count < count {
            let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received <= 0 { return (frames, received == 0) }
            buffer.writeBytes(chunk[0..<received])
            while let payload = try? decoder.nextFrame(&buffer) {
                if let frame = try? ServerFrame(decoding: payload) { frames.append(frame) }
            }
        }
        return (frames, false)
    }

    func close() {
        Glibc.close(descriptor)
    }
}
