import Platform
import Foundation
import Logging
import RegistryClient
import RegistryCore
import RegistryServer
import RegistryTestSupport
import RegistryWire
import Testing

/// A node whose wall clock once ran ahead persisted that clock. Once the wall clock is right
/// again, every operation it stamps would carry the future time and peers would refuse its log
/// until real time caught up, so it must not acknowledge writes in the meantime.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClockAheadTests {
    /// Registers one device on an in-process engine whose wall clock reads `aheadMillis` in the
    /// future, so that the directory's persisted clock is ahead of real time.
    static func writeWithClockAhead(_ directory: String, aheadMillis: UInt64) async throws {
        var configuration = NodeConfiguration()
        configuration.dataDirectory = directory
        configuration.nodeID = try NodeID("node-a")
        configuration.clusterSecret = "clock secret"
        var logger = Logger(label: "clock-ahead")
        logger.logLevel = .critical
        let engine = try RegistryEngine(configuration: configuration, logger: logger, wallClock: { SystemClock.wallMillis() + aheadMillis })
        let frame = ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: "com.clock.app", idfv: UUID128(high: 1, low: 1).text)))
        let answers = await withCheckedContinuation { continuation in
            engine.submit([frame]) { continuation.resume(returning: $0.frames) }
        }
        guard case .registerResult = answers.first?.body else { throw ClusterTests.ClusterError("\(answers)") }
        engine.close()
    }

    @Test func aNodeWhoseClockRanAheadRefusesWritesAndIsNotReady() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path + "/node-a"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await Self.writeWithClockAhead(directory, aheadMillis: 2 * 3_600_000)

        let node = try DaemonProcess(
            dataDirectory: directory, arguments: ["--node-id", "node-a", "--cluster-secret", "clock secret", "--metrics-port", "0"])
        defer { node.stop() }
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), role: .admin, clientName: "clock")
        let refused = await Result { () async throws(RegistryClientError) in
            try await client.register(RegisterRequest(bundleID: "com.clock.app", idfv: UUID128(high: 2, low: 1).text))
        }
        guard case .server(let error) = refused.failure else { return #expect(Bool(false), "a write was acknowledged: \(refused)") }
        #expect(error.code == .clockSkew && error.retryable && error.message.contains("ahead of its wall clock"), "\(error)")
        // Reads go on; stats say why writes are refused, and the refusal is counted.
        let found = try await client.lookup(
            LookupRequest(scope: .bundle("com.clock.app"), identifier: PresentedIdentifier(rawKind: 2, text: UUID128(high: 1, low: 1).text)))
        #expect(!found.deviceID.isEmpty)
        let stats = try await client.stats()
        #expect(stats.writeRefusal.contains("ahead of its wall clock") && stats.errors[.clockSkew] == 1, "\(stats.writeRefusal) \(stats.errors)")
        await client.close()
        let port = try #require(MetricsTests.metricsPort(in: node.log))
        let ready = try httpRequest(port: port, path: "/readyz")
        #expect(ready.status == 503 && ready.body.contains("refusing writes"), "\(ready)")
    }
}
