import Foundation
import Platform
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
    /// The cluster secret of every test node, so that they may peer with one another.
    static let clusterSecret = "test cluster secret"

    let engine: RegistryEngine
    let server: RegistryServer
    let group: ServiceGroup
    let runTask: Task<Void, any Error>
    let port: Int

    static func start(dataDirectory: String, configure: (inout NodeConfiguration) -> Void = { _ in }) async throws -> TestNode {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = TestNode.clusterSecret
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
