import Foundation
import RegistryClient
import RegistryCore
import RegistryWire
import Testing

/// A node removed from the cluster while it still runs: its peers refuse it, so it must stop
/// acknowledging writes that can never replicate, and a removal of a node that runs needs
/// --force.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RemovedNodeTests {
    func ctl(_ arguments: [String]) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments, timeout: 30)
    }

    @Test func aRemovedNodeThatRunsRefusesWritesAndItsRemovalNeedsForce() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        let (a, c) = (cluster.nodes[0].endpoint, cluster.nodes[2].endpoint)
        let linked = try await ClusterTests.stats(a, within: 15) { $0.peers.contains { $0.nodeID == "node-c" && $0.state == "streaming" } }
        #expect(linked.peers.contains { $0.nodeID == "node-c" && $0.state == "streaming" })

        let refused = try ctl(["cluster", "remove", "node-c", "--endpoint", a, "-o", "json"])
        #expect(refused.status != 0 && refused.stderr.contains("--force"), "\(refused.stdout)\(refused.stderr)")
        #expect(try await ClusterTests.stats(a).members.contains { $0.nodeID == "node-c" && !$0.removed })

        let forced = try ctl(["cluster", "remove", "node-c", "--force", "--endpoint", a, "-o", "json"])
        #expect(forced.status == 0, "\(forced.stdout)\(forced.stderr)")

        // Node c learns it from a peer's refusal within seconds, and says so.
        let learned = try await ClusterTests.stats(c, within: 20) { !$0.writeRefusal.isEmpty }
        #expect(learned.writeRefusal.contains("removed"), "\(learned.writeRefusal)")
        #expect(learned.members.contains { $0.nodeID == "node-c" && $0.removed })
        let client = try await RegistryClient.connect(to: Endpoint(parsing: c), clientName: "removed")
        let write = await Result { () async throws(RegistryClientError) in
            try await client.register(RegisterRequest(bundleID: "com.removed.app", idfv: UUID128(high: 9, low: 9).text))
        }
        guard case .server(let error) = write.failure else { return #expect(Bool(false), "a removed node acknowledged a write: \(write)") }
        #expect(error.code == .notAMember && error.retryable && error.message.contains("node-a"), "\(error)")
        await client.close()
        // Knowing it, it closes its links: every peer would welcome it and refuse it again, each
        // time at the shortest backoff, for as long as it ran.
        let unlinked = try await ClusterTests.stats(c, within: 10) { $0.peers.isEmpty }
        #expect(unlinked.peers.isEmpty, "\(unlinked.peers.map { ($0.address, $0.state) })")

        // It stays removed across a restart, and logs no new join for itself.
        cluster.nodes[2].stop()
        cluster.nodes[2] = try cluster.start(2)
        let restarted = try await ClusterTests.stats(cluster.nodes[2].endpoint)
        #expect(!restarted.writeRefusal.isEmpty)
        #expect(try await ClusterTests.stats(a).members.contains { $0.nodeID == "node-c" && $0.removed })
    }
}
