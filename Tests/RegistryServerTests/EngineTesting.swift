import Logging
import RegistryCore
import RegistryWire
@testable import RegistryServer

/// Opening an engine on a data directory and submitting requests to it, for the suites that
/// test the engine directly.
protocol EngineTesting {}

extension EngineTesting {
    func open(_ path: String, nodeID: String? = "node-a", journalFileBytes: Int? = nil) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        if let journalFileBytes { configuration.journalFileBytes = journalFileBytes }
        configuration.nodeID = try nodeID.map { try NodeID($0) }
        return try RegistryEngine(configuration: configuration, logger: .quiet())
    }

    /// Submits and waits for the (durable) answers.
    func submit(_ engine: RegistryEngine, _ bodies: [ClientBody]) async -> [ServerBody] {
        let frames = bodies.enumerated().map { ClientFrame(requestID: UInt64($0.offset + 1), body: $0.element) }
        return await withCheckedContinuation { continuation in
            engine.submit(frames) { continuation.resume(returning: $0.frames.map(\.body)) }
        }
    }
}

extension Logger {
    /// A logger for engines under test: warnings and worse only, so that a passing run prints
    /// what the tests say rather than every engine's start-up.
    static func quiet(_ label: String = "test") -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .warning
        return logger
    }
}

extension NodeConfiguration {
    /// A test engine's configuration: the tests' cluster secret, its data directory and node ID,
    /// and no snapshot unless the test takes one.
    static func withoutSnapshots(_ path: String, node: String) throws -> NodeConfiguration {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID(node)
        configuration.snapshotEveryOperations = 0
        configuration.snapshotEverySeconds = 0
        return configuration
    }
}
