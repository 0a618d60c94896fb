import Foundation
import Platform
import RegistryClient
import RegistryCore
import RegistryWire
import Testing

/// A data directory that goes back in time (a restored backup, a rolled-back disk) must not
/// reuse the (node, epoch, sequence) names its peers already hold with other content.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RestoredBackupTests {
    /// Registers `count` first installs through `endpoint`, each with its own IDFV (`high` names
    /// the step); returns (IDFV, device ID) for each.
    static func register(_ count: Int, step: UInt64, at endpoint: String) async throws -> [(String, String)] {
        let client = try await RegistryClient.connect(to: Endpoint(parsing: endpoint), clientName: "backup")
        var acknowledged = [(String, String)]()
        for index in 1...count {
            let idfv = UUID128(high: step << 32 | UInt64(index), low: 7).text
            let result = try await client.register(RegisterRequest(bundleID: "com.backup.app", idfv: idfv))
            acknowledged.append((idfv, result.deviceID))
        }
        await client.close()
        return acknowledged
    }

    /// The steps of the report: register through A, stop A and copy its directory, register more
    /// through A (they replicate), kill -9 A, put the copy back, start A, register more. Every
    /// acknowledged registration then resolves to its device on every node, and the nodes hold
    /// the same content, not only the same counts.
    @Test func aRestoredBackupNeitherLosesNorHidesWrites() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        var acknowledged = try await Self.register(40, step: 1, at: cluster.nodes[0].endpoint)
        _ = try await cluster.converged(within: 30)

        let backup = cluster.temp.path + "/node-a.backup"
        #expect(cluster.nodes[0].stop() == 0)
        try FileManager.default.copyItem(atPath: cluster.directory(0), toPath: backup)
        cluster.nodes[0] = try cluster.start(0)
        acknowledged += try await Self.register(40, step: 2, at: cluster.nodes[0].endpoint)
        _ = try await cluster.converged(within: 30)

        #expect(cluster.nodes[0].stop(signal: SIGKILL) == SIGKILL)
        try FileManager.default.removeItem(atPath: cluster.directory(0))
        try FileManager.default.copyItem(atPath: backup, toPath: cluster.directory(0))
        cluster.nodes[0] = try cluster.start(0)
        acknowledged += try await Self.register(40, step: 3, at: cluster.nodes[0].endpoint)

        let stats = try await cluster.converged(within: 30)
        #expect(stats.allSatisfy { $0.deviceCount == UInt64(acknowledged.count) }, "\(stats.map(\.deviceCount))")
        for node in cluster.nodes {
            let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "verify")
            var missing = [String]()
            for (idfv, deviceID) in acknowledged {
                let record = try? await reader.lookup(
                    LookupRequest(scope: .bundle("com.backup.app"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
                if record?.deviceID != deviceID { missing.append(idfv) }
            }
            await reader.close()
            #expect(missing.isEmpty, "\(node.endpoint) does not resolve \(missing.count) of \(acknowledged.count) acknowledged registrations")
        }
    }
}
