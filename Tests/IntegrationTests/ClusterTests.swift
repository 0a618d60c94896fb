import Foundation
import Platform
import Synchronization
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing

/// Three `registryd` processes on loopback, replicating to each other.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClusterTests {
    /// A free loopback port: bound, read, released.
    static func freePort() throws -> Int {
        guard let (descriptor, port) = boundLoopbackSocket() else { throw ClusterError("no free port") }
        close(descriptor)
        return port
    }

    struct ClusterError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Three nodes, node-a..node-c. `peersOf[i]` lists the addresses node i streams to; by
    /// default every node's list names all three, its own included (which it skips).
    final class Cluster {
        let temp: TemporaryDirectory
        let ports: [Int]
        var nodes: [DaemonProcess]
        let lists: [String]
        /// The test that started the cluster, to file its nodes' logs under (``keepLogs()``).
        let testName = Test.current.map { String($0.name.prefix { $0 != "(" }) } ?? "unnamed"
        static let names = ["node-a", "node-b", "node-c"]

        init(peerLists: (([Int]) -> [String])? = nil, ports given: [Int]? = nil, extra: [String] = [], perNode: [[String]] = []) throws {
            self.extra = extra
            self.perNode = perNode
            temp = try TemporaryDirectory()
            ports = try given ?? (0..<3).map { _ in try ClusterTests.freePort() }
            let all = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
            lists = peerLists?(ports) ?? Array(repeating: all, count: 3)
            nodes = []
            for index in 0..<3 {
                try FileManager.default.createDirectory(atPath: directory(index), withIntermediateDirectories: true)
                nodes.append(try start(index))
            }
        }

        func directory(_ index: Int) -> String { temp.path + "/" + Self.names[index] }

        /// Extra flags for every node.
        var extra: [String] = []
        /// Extra flags for each node, by index (none for an index past the end).
        let perNode: [[String]]

        func start(_ index: Int) throws -> DaemonProcess {
            try DaemonProcess(
                dataDirectory: directory(index), port: ports[index],
                arguments: ["--node-id", Self.names[index], "--cluster-id", "test", "--cluster-secret", "s3cret", "--peers", lists[index]]
                    + extra + (index < perNode.count ? perNode[index] : []))
        }

        var endpoints: String { nodes.map(\.endpoint).joined(separator: ",") }

        func stop() {
            for node in nodes { node.stop() }
            keepLogs()
            temp.remove()
        }

        /// With `REGISTRY_TEST_LOGS` set (scripts/run-tests.sh sets it), copies the nodes' logs
        /// into a folder of it named after the test, so that a failed run can show them
        /// (scripts/test-failure-summary.sh); the data directories go as before.
        private func keepLogs() {
            guard let root = ProcessInfo.processInfo.environment["REGISTRY_TEST_LOGS"], !root.isEmpty else { return }
            let folder = root + "/" + testName + "." + UUID().uuidString.prefix(8)
            guard (try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)) != nil else { return }
            for index in Self.names.indices {
                try? FileManager.default.copyItem(atPath: directory(index) + ".log", toPath: folder + "/" + Self.names[index] + ".log")
            }
        }

        /// Waits (up to `seconds`) until every node holds the same operations and content.
        func converged(within seconds: Double) async throws -> [StatsMessage] {
            try await ClusterTests.converged(nodes.map(\.endpoint), within: seconds)
        }
    }

    /// Three nodes of which node `isolated` is reached, and reaches the others, only through
    /// relays (one to each node, in node order) that a test can cut and heal; the others reach each
    /// other directly. Close the relays after stopping the cluster.
    ///
    /// The nodes' ports are chosen free before the relays take ports of their own, and tests
    /// running beside this one take ports too: when a node finds its port taken, the whole set
    /// starts again on new ports (three tries).
    static func relayedCluster(isolating isolated: Int, extra: [String] = []) throws -> (Cluster, [CuttableProxy]) {
        for attempt in 1...3 {
            let ports = try (0..<3).map { _ in try freePort() }
            let relays = try ports.map { try CuttableProxy(toPort: $0) }
            do {
                let cluster = try Cluster(
                    peerLists: { ports in
                        (0..<3).map { node in
                            (0..<3).filter { $0 != node }.map { other in
                                "127.0.0.1:\(node == isolated || other == isolated ? relays[other].port : ports[other])"
                            }.joined(separator: ",")
                        }
                    }, ports: ports, extra: extra,
                    // Each node advertises its relay: a node links to a member at its advertised
                    // address when no link of its own has reached that member yet (a relayed link
                    // still dialling under load), and a direct one would outlive every cut.
                    perNode: relays.map { ["--advertise", "127.0.0.1:\($0.port)"] })
                return (cluster, relays)
            } catch DaemonProcess.DaemonError.exited(_, let log) where log.contains("Address already in use") && attempt < 3 {
                for relay in relays { relay.close() }
            } catch {
                for relay in relays { relay.close() }
                throw error
            }
        }
        throw ClusterError("unreachable: every attempt returns or throws")
    }

    /// Waits (up to `seconds`) until every endpoint's node holds the same version vector and the
    /// same state digest (``ClusterAgreement``); fails at once when equal vectors hold different
    /// digests, which no amount of waiting mends.
    static func converged(_ endpoints: [String], within seconds: Double) async throws -> [StatsMessage] {
        let deadline = Date().addingTimeInterval(seconds)
        var last = [StatsMessage]()
        while Date() < deadline {
            last = []
            for endpoint in endpoints {
                let client = try await RegistryClient.connect(to: Endpoint(parsing: endpoint), role: .admin, clientName: "test")
                last.append(try await client.stats())
                await client.close()
            }
            switch ClusterAgreement(last) {
            case .converged: return last
            case .diverged: throw ClusterError(ClusterAgreement(last).summary)
            case .catchingUp: try await Task.sleep(for: .milliseconds(100))
            }
        }
        throw ClusterError("no convergence in \(seconds) s: \(last.map { "\($0.nodeID) \($0.versionVector) \($0.deviceCount)/\($0.aliasCount)/\($0.claimCount)" })")
    }

    /// Waits (up to `seconds`) until `condition` holds for the stats of the node at `endpoint`;
    /// returns the last stats read, whether it holds or not.
    static func stats(
        _ endpoint: String, within seconds: Double, until condition: (StatsMessage) -> Bool
    ) async throws -> StatsMessage {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let current = try await Self.stats(endpoint)
            if condition(current) || Date() >= deadline { return current }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Waits (up to 15 s) until the node at `endpoint` streams to `peers` peers.
    /// Waits until `endpoint` streams to `peers` peers. The bound is loose: under a loaded CI
    /// machine three starting nodes can spend several capped 5 s back-offs dialling each other.
    static func waitUntilStreaming(_ endpoint: String, to peers: Int) async throws {
        let linked = try await stats(endpoint, within: 40) { node in node.peers.filter { $0.state == "streaming" }.count >= peers }
        let streaming = linked.peers.filter { $0.state == "streaming" }.count
        guard streaming >= peers else { throw ClusterError("\(endpoint) streams to \(streaming) peers, not \(peers)") }
    }

    static func stats(_ endpoint: String) async throws -> StatsMessage {
        let client = try await RegistryClient.connect(to: Endpoint(parsing: endpoint), role: .admin, clientName: "test")
        let stats = try await client.stats()
        await client.close()
        return stats
    }

    func load(_ arguments: [String]) throws -> CommandResult {
        try run(Binaries.path("registryload"), arguments, timeout: 120)
    }

    func report(at path: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
        return try #require(object as? [String: Any])
    }

    /// Thousands of sibling races, each pair's two apps registering at the same moment through
    /// two different nodes: every pair gets one ID, and afterwards every acknowledged
    /// registration resolves identically on all three nodes.
    @Test func siblingRacesAcrossThreeNodesGiveOneIDEach() async throws {
        let cluster = try Cluster()
        defer { cluster.stop() }
        let reportPath = cluster.temp.path + "/siblings.json"
        let result = try load([
            "--endpoints", cluster.endpoints, "--connections", "6", "--threads", "1", "--in-flight", "4", "--requests", "8000",
            "--warmup", "0s", "--workload", "concurrent-siblings", "--seed", "11", "--verify", "--verify-wait", "10s", "--json", reportPath,
        ])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let json = try report(at: reportPath)
        let workload = try #require(json["workload"] as? [String: Any])
        let pairs = workload["concurrent_pairs"] as? Int ?? 0
        let split = workload["concurrent_pairs_with_different_ids"] as? Int ?? -1
        print("sibling races across 3 nodes: \(pairs) pairs, \(split) with different IDs")
        #expect(pairs >= 2_000 && split == 0)
        let verification = try #require(json["verification"] as? [String: Any])
        #expect(verification["lost"] as? Int == 0 && verification["mismatched"] as? Int == 0)
        let stats = try await cluster.converged(within: 20)
        // One device per pair, and no merge was needed for any of them.
        #expect(stats.allSatisfy { $0.aliasCount == 0 && $0.deviceCount == UInt64(pairs) }, "\(stats.map { ($0.deviceCount, $0.aliasCount) })")
        // Every node streams to the other two and skips its own address.
        for node in stats {
            #expect(node.peers.filter { $0.state == "streaming" }.count == 2 && node.peers.filter { $0.state == "own-address" }.count == 1)
        }
    }

    /// Registrations spread over the three nodes while one is killed with SIGKILL and restarted,
    /// and while another is cut off from the rest and healed: afterwards every acknowledged
    /// registration resolves to its ID on every node, and the nodes hold the same state.
    @Test func acknowledgedWritesSurviveAKilledNodeAndAPartition() async throws {
        // Node c is reached, and reaches the others, only through relays the test can cut.
        let (cluster, relays) = try Self.relayedCluster(isolating: 2)
        defer { for relay in relays { relay.close() } }
        defer { cluster.stop() }
        let ports = cluster.ports
        let acknowledged = ManagedAcknowledgements()
        let phase = Phase()

        /// One writer per node, registering until told to stop; a dead node's writer reconnects.
        @Sendable func writer(_ index: Int) -> Task<Void, Never> {
            Task {
                var sequence: UInt64 = 0
                while phase.value < 3 {
                    guard let client = try? await RegistryClient.connect(to: Endpoint(parsing: "127.0.0.1:\(ports[index])"), clientName: "w") else {
                        try? await Task.sleep(for: .milliseconds(50))
                        continue
                    }
                    while phase.value < 3 {
                        sequence += 1
                        let idfv = UUID128(high: UInt64(index + 1) << 48 | sequence, low: 1).text
                        guard let result = try? await client.register(RegisterRequest(bundleID: "com.fault.app\(index)", idfv: idfv)) else { break }
                        acknowledged.append(idfv: idfv, deviceID: result.deviceID)
                    }
                    await client.close()
                }
            }
        }
        let writers = (0..<3).map(writer)
        /// Lets the writers run for `millis`, and on until `more` writes were acknowledged in all
        /// (a busy machine's disk makes each one slow), for at most 20 s of this task's time
        /// (`poll`: the writers wait for the same threads this task does).
        func run(_ millis: Int, more: Int) async throws -> Int {
            let start = acknowledged.count
            try await Task.sleep(for: .milliseconds(millis))
            _ = try await poll(upTo: .seconds(20), every: .milliseconds(50)) { acknowledged.count >= start + more }
            return acknowledged.count
        }
        var counts = [try await run(700, more: 100)]
        // Kill -9 node b mid-load, and restart it.
        #expect(cluster.nodes[1].stop(signal: SIGKILL) == SIGKILL)
        try await Task.sleep(for: .milliseconds(300))
        cluster.nodes[1] = try cluster.start(1)
        phase.value = 1
        counts.append(try await run(500, more: 100))
        // Cut node c off from both others while all three keep taking writes, then heal.
        for relay in relays { relay.cut() }
        phase.value = 2
        counts.append(try await run(1_000, more: 100))
        for relay in relays { relay.heal() }
        counts.append(try await run(500, more: 50))
        phase.value = 3
        print("faults across 3 nodes: acknowledged by the end of each phase: \(counts)")
        for task in writers { await task.value }

        let stats = try await cluster.converged(within: 30)
        let acked = acknowledged.all
        var lost = 0
        for node in cluster.nodes {
            let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "verify")
            for (index, (idfv, deviceID)) in acked.enumerated() {
                let app = Int(UUID128(text: idfv)!.high >> 48) - 1
                let record = try? await reader.lookup(
                    LookupRequest(scope: .bundle("com.fault.app\(app)"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
                if record?.deviceID != deviceID {
                    lost += 1
                    if lost < 5 { print("\(node.endpoint): acknowledged #\(index) \(idfv) -> \(deviceID), now \(String(describing: record?.deviceID))") }
                }
            }
            await reader.close()
        }
        print("faults across 3 nodes: \(acked.count) acknowledged registrations, \(lost) lost or different on some node")
        // Writes were acknowledged in every phase (how many depends on how busy the machine is: a
        // full-suite CI run got 285 in all, a run alone about 2,000), and none was lost.
        #expect(counts[0] >= 100 && zip(counts, counts.dropFirst()).allSatisfy { $0 < $1 }, "\(counts)")
        #expect(lost == 0)
        #expect(stats.allSatisfy { $0.deviceCount == UInt64(acked.count) || $0.deviceCount >= UInt64(acked.count) })
        // The restarted node kept its node ID and epoch (its data survived), and the links came back.
        #expect(cluster.nodes[1].log.contains("node=node-b"))
        // Counted as (node, peer node ID) pairs, which is what "streams to both others" means: a
        // node whose configured link has not reached a member yet links to the member's advertised
        // address too (a full-suite run once saw 7 streaming links for the 6 pairs).
        var streaming = Set<String>()
        let deadline = Date().addingTimeInterval(15)
        while streaming.count < 6, Date() < deadline {
            streaming = []
            for (index, node) in cluster.nodes.enumerated() {
                let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), role: .admin, clientName: "test")
                for peer in try await client.stats().peers where peer.state == "streaming" { streaming.insert("\(index)>\(peer.nodeID)") }
                await client.close()
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(streaming.count == 6, "every node streams to both others again: \(streaming.sorted())")
        #expect(stats.count == 3)
        // registryload --verify against all three nodes, over a short run of its own.
        let result = try load([
            "--endpoints", cluster.endpoints, "--connections", "3", "--threads", "1", "--requests", "1500", "--warmup", "0s",
            "--workload", "first-install=50,returning=20,sibling=10,concurrent-siblings=20", "--verify", "--verify-wait", "10s",
        ])
        #expect(result.status == 0 && result.stdout.contains("0 lost, 0 mismatched"), "\(result.stdout)\n\(result.stderr)")
    }

    /// A member that comes back at another address (a new IP, say) and advertises it is linked to
    /// there: the others' links to its old address, which no longer reach it, stop counting as
    /// its link after a few seconds, so what they write reaches it again. (Before, a link that
    /// had once named the member stayed its link, and nothing the others wrote reached it until
    /// they restarted.)
    @Test func aMemberThatMovesIsLinkedToAtItsNewAddress() async throws {
        let cluster = try Cluster()
        defer { cluster.stop() }
        try await ClusterTests.waitUntilStreaming(cluster.nodes[0].endpoint, to: 2)
        try await ClusterTests.waitUntilStreaming(cluster.nodes[1].endpoint, to: 2)
        #expect(cluster.nodes[2].stop() == 0)
        let moved = try ClusterTests.freePort()
        cluster.nodes[2] = try DaemonProcess(
            dataDirectory: cluster.directory(2), port: moved,
            arguments: [
                "--node-id", "node-c", "--cluster-id", "test", "--cluster-secret", "s3cret", "--peers", cluster.lists[2],
                "--advertise", "127.0.0.1:\(moved)",
            ])
        let client = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[0].endpoint), clientName: "test")
        _ = try await client.register(RegisterRequest(bundleID: "com.moved.app", idfv: UUID128(high: 7, low: 7).text))
        await client.close()
        // node-a's write reaches node-c: node-a or node-b links to its new address.
        let stats = try await cluster.converged(within: 60)
        #expect(stats.allSatisfy { $0.deviceCount == 1 }, "\(stats.map(\.deviceCount))")
        let linked = try await ClusterTests.stats(cluster.nodes[0].endpoint, within: 10) { node in
            node.peers.contains { $0.address == "127.0.0.1:\(moved)" && $0.state == "streaming" }
        }
        #expect(linked.peers.contains { $0.address == "127.0.0.1:\(moved)" && $0.state == "streaming" }, "\(linked.peers.map { "\($0.address) \($0.state)" })")
    }

    /// A node that comes back far behind its peers sizes its indexes once, from what their hellos
    /// say they hold, before the first operations it takes (``PeerHoldings``), and catches up; the
    /// peers, which lack next to nothing of it, size nothing.
    @Test func aNodeFarBehindSizesItsIndexesOnceToCatchUp() async throws {
        let cluster = try Cluster()
        defer { cluster.stop() }
        try await ClusterTests.waitUntilStreaming(cluster.nodes[2].endpoint, to: 2)
        #expect(cluster.nodes[2].stop() == 0)
        let written = try load([
            "--endpoints", "\(cluster.nodes[0].endpoint),\(cluster.nodes[1].endpoint)", "--connections", "4", "--threads", "1",
            "--batch", "100", "--requests", "200000", "--warmup", "0s", "--seed", "6",
        ])
        #expect(written.status == 0, "\(written.stdout)\n\(written.stderr)")
        cluster.nodes[2] = try cluster.start(2)
        let stats = try await cluster.converged(within: 90)
        #expect(stats[2].deviceCount >= 200_000 && stats[2].deviceCount == stats[0].deviceCount)
        let sized = cluster.nodes[2].log.components(separatedBy: "\n").filter { $0.contains("sizing the indexes to catch up with a peer") }
        // Once: the second peer's hello asks for no more than the first one's reserved.
        #expect(sized.count == 1, "node-c sized its indexes \(sized.count) times:\n\(cluster.nodes[2].log.suffix(3_000))")
        for index in 0..<2 {
            #expect(!cluster.nodes[index].log.contains("sizing the indexes"), "\(Cluster.names[index]) sized its indexes for node-c")
        }
    }

    /// A node joins by naming one member: the others learn of it from the membership operation it
    /// logs, link to it, and all four converge. Removed, it is refused from then on.
    @Test func aNodeJoinsByNamingOneMemberAndARemovedOneIsRefused() async throws {
        let cluster = try Cluster()
        defer { cluster.stop() }
        let directory = cluster.temp.path + "/node-d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let arguments = ["--node-id", "node-d", "--cluster-id", "test", "--cluster-secret", "s3cret", "--peers", "127.0.0.1:\(cluster.ports[0])"]
        var d = try DaemonProcess(dataDirectory: directory, port: try ClusterTests.freePort(), arguments: arguments)
        defer { d.stop() }
        let atD = try await RegistryClient.connect(to: Endpoint(parsing: d.endpoint), clientName: "t")
        let atC = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[2].endpoint), clientName: "t")
        let fromD = try await atD.register(RegisterRequest(bundleID: "com.join.app", idfv: UUID128(high: 4, low: 1).text))
        let fromC = try await atC.register(RegisterRequest(bundleID: "com.join.app", idfv: UUID128(high: 3, low: 1).text))
        await atD.close()
        await atC.close()
        let all = cluster.nodes.map(\.endpoint) + [d.endpoint]
        let stats = try await ClusterTests.converged(all, within: 20)
        #expect(stats.allSatisfy { $0.members.map(\.nodeID) == ["node-a", "node-b", "node-c", "node-d"] })
        // The others link to node-d once its join reached them (they look every second); the
        // bound is loose because a loaded machine stretches each look and each dial's retry.
        var linked = [StatsMessage]()
        let linkDeadline = Date().addingTimeInterval(30)
        repeat {
            linked = []
            for node in cluster.nodes { linked.append(try await ClusterTests.stats(node.endpoint)) }
            if linked.allSatisfy({ $0.peers.contains { $0.nodeID == "node-d" } }) { break }
            try await Task.sleep(for: .milliseconds(200))
        } while Date() < linkDeadline
        for node in linked {
            #expect(node.peers.contains { $0.nodeID == "node-d" }, "\(node.nodeID) links to node-d")
        }
        let reader = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[1].endpoint), clientName: "r")
        #expect(try await reader.resolve(deviceID: fromD.deviceID).deviceID == fromD.deviceID)
        await reader.close()
        let readerD = try await RegistryClient.connect(to: Endpoint(parsing: d.endpoint), clientName: "r")
        #expect(try await readerD.resolve(deviceID: fromC.deviceID).deviceID == fromC.deviceID)
        await readerD.close()

        // node-d dies and is removed through node-b.
        d.stop(signal: SIGKILL)
        let removed = try run(
            Binaries.path("registryctl"), ["cluster", "remove", "node-d", "--endpoint", cluster.nodes[1].endpoint, "-o", "json"])
        #expect(removed.status == 0 && removed.stdout.contains("node-d"), "\(removed.stdout)\(removed.stderr)")
        var seen = [StatsMessage]()
        let deadline = Date().addingTimeInterval(15)
        repeat {
            try await Task.sleep(for: .milliseconds(200))
            seen = []
            for node in cluster.nodes { seen.append(try await ClusterTests.stats(node.endpoint)) }
        } while Date() < deadline
            && !seen.allSatisfy({ $0.members.contains { $0.nodeID == "node-d" && $0.removed } && !$0.peers.contains { $0.nodeID == "node-d" } })
        #expect(seen.allSatisfy { $0.members.contains { $0.nodeID == "node-d" && $0.removed } }, "every node holds the removal")
        #expect(seen.allSatisfy { !$0.peers.contains { $0.nodeID == "node-d" } }, "no node links to node-d any more")
        // Back with the same ID, it is refused.
        d = try DaemonProcess(dataDirectory: directory, port: try ClusterTests.freePort(), arguments: arguments)
        var refused = 0
        for _ in 0..<50 where refused == 0 {
            try await Task.sleep(for: .milliseconds(100))
            refused = Int(try await ClusterTests.stats(cluster.nodes[0].endpoint).errors[.nodeRemoved] ?? 0)
        }
        #expect(refused > 0, "node-a refused the removed node")
        // The cluster itself carries on: a removal cannot be undone by a node removing itself.
        let self_ = try run(Binaries.path("registryctl"), ["cluster", "remove", "node-b", "--endpoint", cluster.nodes[1].endpoint])
        #expect(self_.status == 1 && self_.stderr.contains("cannot remove itself"))
    }

    /// Which part of a fault test runs, shared with its writers.
    final class Phase: Sendable {
        private let current = Mutex(0)
        var value: Int {
            get { current.withLock { $0 } }
            set { current.withLock { $0 = newValue } }
        }
    }

    /// --ack-replicas: a write is answered once the peers it asks for hold it; with them down,
    /// the answer is a retryable REPLICATION_TIMEOUT, and the write is kept and replicates later.
    @Test func writesWaitForTheReplicasTheyAskFor() async throws {
        let cluster = try Cluster(extra: ["--replica-timeout", "0.5"])
        defer { cluster.stop() }
        let a = cluster.nodes[0].endpoint
        // Wait for the links, not for a time: a write asks for replicas once both stream.
        try await Self.waitUntilStreaming(a, to: 2)
        let both = try await RegistryClient.connect(to: Endpoint(parsing: a), clientName: "t", ackReplicas: 2)
        let first = try await both.register(RegisterRequest(bundleID: "com.acks.app", idfv: UUID128(high: 1, low: 1).text))
        // Both peers hold it the moment it is answered.
        for node in cluster.nodes.dropFirst() {
            let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "r")
            #expect(try await reader.resolve(deviceID: first.deviceID).deviceID == first.deviceID)
            await reader.close()
        }
        // A bind waits for the same replicas: both peers hold it the moment it is answered.
        try await Self.bindHeldByPeers(both, device: first.deviceID, peers: Array(cluster.nodes.dropFirst()))
        // More peers than the node has: refused, nothing written.
        let tooMany = try await RegistryClient.connect(to: Endpoint(parsing: a), clientName: "t", ackReplicas: 3)
        await #expect(throws: RegistryClientError.server(WireError(code: .invalidArgument, message: "ack_replicas 3 exceeds the 2 peers this node streams to"))) {
            _ = try await tooMany.register(RegisterRequest(bundleID: "com.acks.app", idfv: UUID128(high: 1, low: 2).text))
        }
        // Both peers down: durable here, but not confirmed in time.
        cluster.nodes[1].stop(signal: SIGKILL)
        cluster.nodes[2].stop(signal: SIGKILL)
        let idfv = UUID128(high: 1, low: 3).text
        do {
            _ = try await both.register(RegisterRequest(bundleID: "com.acks.app", idfv: idfv))
            Issue.record("a write no peer could confirm was answered as replicated")
        } catch .server(let error) {
            #expect(error.code == .replicationTimeout && error.retryable, "\(error)")
        }
        await Self.unbindTimesOut(both, device: first.deviceID)
        let local = try await RegistryClient.connect(to: Endpoint(parsing: a), clientName: "r")
        let kept = try await local.lookup(LookupRequest(scope: .vendor("com.acks"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
        // The peers come back, and the kept write reaches them.
        cluster.nodes[1] = try cluster.start(1)
        cluster.nodes[2] = try cluster.start(2)
        _ = try await cluster.converged(within: 15)
        let reader = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[2].endpoint), clientName: "r")
        #expect(try await reader.resolve(deviceID: kept.deviceID).deviceID == kept.deviceID)
        for client in [both, tooMany, local, reader] { await client.close() }
    }

    /// Binds an account to `device` through `client` (which asks for every peer) and checks that
    /// each of `peers` holds the binding as soon as it is answered.
    static func bindHeldByPeers(_ client: RegistryClient, device: String, peers: [DaemonProcess]) async throws {
        let result = try await client.bind(account: "acks-user", deviceID: device, scope: .vendor("com.acks"))
        #expect(result.outcome == .bound)
        for node in peers {
            let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "r")
            let accounts = try await reader.accounts(AccountQuery(scope: .vendor("com.acks"), subject: .account("acks-user")))
            #expect(accounts.first?.bound.map(\.deviceID) == [device])
            await reader.close()
        }
    }

    /// With no peer up to confirm it, an unbind asking for replicas times out, retryably.
    static func unbindTimesOut(_ client: RegistryClient, device: String) async {
        do {
            _ = try await client.unbind(account: "acks-user", deviceID: device, scope: .vendor("com.acks"))
            Issue.record("an unbind no peer could confirm was answered as replicated")
        } catch .server(let error) {
            #expect(error.code == .replicationTimeout && error.retryable, "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    /// Journal files numbered in a node's data directory, oldest first.
    static func journalFiles(_ directory: String) throws -> [Int] {
        try FileManager.default.contentsOfDirectory(atPath: directory).compactMap { name in
            name.hasPrefix("journal-") && name.hasSuffix(".log") ? Int(name.dropFirst("journal-".count).dropLast(".log".count)) : nil
        }.sorted()
    }

    /// Once the three nodes have snapshotted and trimmed their journals, a node that joins empty
    /// and a node whose data directory was wiped cannot be sent the log from its start: each gets
    /// a peer's snapshot in chunks, then the tail, and converges; and a restart keeps what it got.
    @Test func aNewNodeAndAWipedOneCatchUpFromASnapshotOnceTheJournalsAreTrimmed() async throws {
        let cluster = try Cluster(extra: ["--journal-file-bytes", "65536", "--snapshot-every-operations", "0", "--snapshot-every-seconds", "0"])
        defer { cluster.stop() }
        func write(_ requests: Int, seed: Int) throws {
            let result = try load([
                "--endpoints", cluster.endpoints, "--connections", "3", "--threads", "1", "--requests", "\(requests)", "--warmup", "0s",
                "--seed", "\(seed)",
            ])
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        }
        func snapshotAll() async throws {
            _ = try await cluster.converged(within: 20)
            // Every node learns within a second that its peers hold everything (the retention floor).
            try await Task.sleep(for: .milliseconds(1_500))
            for node in cluster.nodes {
                // A snapshot is answered once durable: seconds on a loaded machine.
                let taken = try run(Binaries.path("registryctl"), ["snapshot", "--endpoint", node.endpoint, "--timeout", "60"])
                #expect(taken.status == 0, "\(taken.stdout)\(taken.stderr)")
            }
        }
        let started = Date()
        func phase(_ name: String) { print("snapshot catch-up: \(name) after \(Int(Date().timeIntervalSince(started) * 1_000)) ms") }
        try write(20_000, seed: 1)
        try await snapshotAll()
        try write(2_000, seed: 2)
        try await snapshotAll()
        for index in 0..<3 {
            let files = try ClusterTests.journalFiles(cluster.directory(index))
            #expect(files.first ?? 1 > 1, "\(Cluster.names[index]) trimmed its journal: \(files)")
            // Restarted, a node no longer keeps its recent operations in memory: the journal is
            // all it can send from.
            #expect(cluster.nodes[index].stop() == 0)
            cluster.nodes[index] = try cluster.start(index)
        }

        phase("trimmed and restarted")
        // A new node names one member.
        let directory = cluster.temp.path + "/node-d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let arguments = ["--node-id", "node-d", "--cluster-id", "test", "--cluster-secret", "s3cret", "--peers", "127.0.0.1:\(cluster.ports[0])"]
        let port = try ClusterTests.freePort()
        var d = try DaemonProcess(dataDirectory: directory, port: port, arguments: arguments)
        defer { d.stop() }
        let all = { cluster.nodes.map(\.endpoint) + [d.endpoint] }
        var stats = try await ClusterTests.converged(all(), within: 60)
        #expect(stats[0].deviceCount > 15_000)
        phase("node-d converged")
        let joined = try #require(stats.last)
        #expect(joined.snapshotOperations > 20_000, "node-d installed a snapshot: \(joined.snapshotOperations)")
        // Sized by the snapshot it installed, before the first batch: nothing left to size for.
        #expect(!d.log.contains("sizing the indexes"), "node-d sized its indexes before a snapshot")
        try write(1_000, seed: 3)
        stats = try await ClusterTests.converged(all(), within: 30)

        phase("node-d converged after more writes")
        // It keeps it across a restart.
        #expect(d.stop() == 0)
        d = try DaemonProcess(dataDirectory: directory, port: port, arguments: arguments)
        let restarted = try await ClusterTests.stats(d.endpoint)
        #expect(restarted.deviceCount == stats[0].deviceCount && restarted.versionVector == stats[0].versionVector)

        // node-b loses its data directory: a new epoch, and a snapshot again.
        _ = cluster.nodes[1].stop(signal: SIGKILL)
        try FileManager.default.removeItem(atPath: cluster.directory(1))
        try FileManager.default.createDirectory(atPath: cluster.directory(1), withIntermediateDirectories: true)
        cluster.nodes[1] = try cluster.start(1)
        phase("node-b wiped and restarted")
        stats = try await ClusterTests.converged(all(), within: 60)
        phase("node-b converged")
        #expect(stats[1].snapshotOperations > 20_000, "node-b installed a snapshot: \(stats[1].snapshotOperations)")
        #expect(Set(stats.map(\.deviceCount)).count == 1)
    }
}

/// Peers size batches and snapshot chunks to the receiver's frame limit.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SmallFrameClusterTests {
    /// At the smallest frame limit a node accepts, 3,000 first installs sent in batches of 50
    /// through one node reach the other two (on f895048 senders built 256 KiB batches, which a
    /// receiver at this limit refused as too large, for ever).
    @Test func aClusterReplicatesAtTheSmallestFrameLimit() async throws {
        let cluster = try ClusterTests.Cluster(extra: ["--max-frame-bytes", "4096"])
        defer { cluster.stop() }
        let client = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[0].endpoint), clientName: "small")
        for batch in 0..<60 {
            let requests = (0..<50).map { index in
                RegisterRequest(bundleID: "com.small.app", idfv: UUID128(high: UInt64(batch + 1) << 32 | UInt64(index), low: 5).text)
            }
            let items = try await client.registerBatch(requests)
            #expect(items.allSatisfy { if case .result = $0 { true } else { false } })
        }
        await client.close()
        let stats = try await cluster.converged(within: 60)
        #expect(stats.allSatisfy { $0.deviceCount == 3_000 }, "\(stats.map(\.deviceCount))")
        #expect(stats.allSatisfy { ($0.errors[.frameTooLarge] ?? 0) == 0 }, "\(stats.map(\.errors))")
    }
}
