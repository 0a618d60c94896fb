import Foundation
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing

/// Accounts bound to devices on real processes: `registryctl account` against one node whose
/// bindings outlive a restart and a snapshot, and two nodes that each accept a bind of one account
/// while a cut link keeps them apart, then agree once it heals.
@Suite(.serialized, .timeLimit(.minutes(5))) struct AccountTests {
    func ctl(_ arguments: [String], endpoint: String) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments + ["-o", "json"], environment: ["REGISTRY_ENDPOINT": endpoint])
    }

    func json(_ result: CommandResult) throws -> [String: Any] {
        #expect(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(object as? [String: Any], "\(result.stdout)")
    }

    /// The devices bound to `account` as `registryctl account show` prints them.
    func bound(_ account: String, endpoint: String) throws -> [String] {
        let shown = try json(try ctl(["account", "show", "--vendor", "com.v", "--account", account], endpoint: endpoint))
        let accounts = try #require(shown["accounts"] as? [[String: Any]])
        return (accounts.first?["bound"] as? [[String: Any]] ?? []).compactMap { $0["deviceId"] as? String }
    }

    @Test func registryctlBindsShowsAndUnbindsAndBindingsOutliveARestartAndASnapshot() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "node-it"])
        defer { node.stop() }
        let devices = try ["11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"].map { idfv in
            try json(try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv], endpoint: node.endpoint))["deviceId"] as! String
        }
        let bind = try json(try ctl(["account", "bind", "--vendor", "com.v", "--account", "alice", "--device", devices[0]], endpoint: node.endpoint))
        #expect(bind["outcome"] as? String == "bound")
        // The default policy: one device; a second bind is refused, exits 0, and names the first.
        let refused = try ctl(["account", "bind", "--bundle", "com.v.b", "--account", "alice", "--device", devices[1]], endpoint: node.endpoint)
        let refusal = try json(refused)
        #expect(refusal["outcome"] as? String == "rejected")
        let account = try #require(refusal["account"] as? [String: Any])
        #expect((account["bound"] as? [[String: Any]])?.compactMap { $0["deviceId"] as? String } == [devices[0]])
        #expect(try bound("alice", endpoint: node.endpoint) == [devices[0]])

        // Replayed from the journal, then restored from a snapshot.
        #expect(node.stop() == 0)
        node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "node-it"])
        #expect(try bound("alice", endpoint: node.endpoint) == [devices[0]])
        #expect(try ctl(["snapshot"], endpoint: node.endpoint).status == 0)
        #expect(node.stop() == 0)
        node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "node-it"])
        #expect(try bound("alice", endpoint: node.endpoint) == [devices[0]])

        let unbind = try json(try ctl(["account", "unbind", "--vendor", "com.v", "--account", "alice", "--device", devices[0]], endpoint: node.endpoint))
        #expect(unbind["outcome"] as? String == "unbound")
        let again = try json(try ctl(["account", "unbind", "--vendor", "com.v", "--account", "alice", "--device", devices[0]], endpoint: node.endpoint))
        #expect(again["outcome"] as? String == "not-bound")
        let byDevice = try json(try ctl(["account", "show", "--vendor", "com.v", "--device", devices[0]], endpoint: node.endpoint))
        let unboundList = (byDevice["accounts"] as? [[String: Any]])?.first?["unbound"] as? [[String: Any]]
        #expect(unboundList?.first?["reason"] as? String == "unbound")

        // Bad input: a typed server error (exit 1), an account with nothing bound (exit 3), bad usage (exit 64).
        let empty = try ctl(["account", "bind", "--vendor", "com.v", "--account", "", "--device", devices[0]], endpoint: node.endpoint)
        #expect(empty.status == 1 && empty.stderr.contains("invalid_argument"), "\(empty.stderr)")
        let nobody = try ctl(["account", "show", "--vendor", "com.v", "--account", "nobody"], endpoint: node.endpoint)
        #expect(nobody.status == 3, "\(nobody.stderr)")
        let usage = try ctl(["account", "show", "--vendor", "com.v"], endpoint: node.endpoint)
        #expect(usage.status == 64 && usage.stderr.contains("exactly one of --account, --account-key or --device"), "\(usage.stderr)")
        let help = try run(Binaries.path("registryctl"), ["account", "bind", "--help"])
        #expect(help.stdout.contains("--account") && help.stdout.contains("Bind an account to a device"), "\(help.stdout)")
    }

    /// Node-b reaches the others only through relays the test cuts. Cut off, node-a and node-b
    /// each bind alice to a different device, and each answers BOUND (the window docs/cluster.md
    /// describes). Healed, all three nodes answer the same: the earlier bind keeps its device, the
    /// later device is reported refused.
    @Test func bindsAcceptedOnBothSidesOfACutLinkResolveAlikeOnEveryNode() async throws {
        let (cluster, relays) = try ClusterTests.relayedCluster(isolating: 1)
        defer { for relay in relays { relay.close() } }
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let a = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[0].endpoint), clientName: "account-test")
        let b = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[1].endpoint), clientName: "account-test")
        defer { Task { await a.close(); await b.close() } }
        let phone = try await a.register(RegisterRequest(bundleID: "com.v.a", idfv: "11111111-1111-4111-8111-111111111111")).deviceID
        let tablet = try await a.register(RegisterRequest(bundleID: "com.v.a", idfv: "22222222-2222-4222-8222-222222222222")).deviceID
        _ = try await cluster.converged(within: 20)

        for relay in relays { relay.cut() }
        let onA = try await a.bind(account: "alice", deviceID: phone, scope: .vendor("com.v"))
        try await Task.sleep(for: .milliseconds(5))
        let onB = try await b.bind(account: "alice", deviceID: tablet, scope: .vendor("com.v"))
        #expect(onA.outcome == .bound && onB.outcome == .bound, "each side alone accepts its bind")
        #expect(onB.account?.bound.map(\.deviceID) == [tablet])
        for relay in relays { relay.heal() }
        _ = try await cluster.converged(within: 30)

        var answers = [[AccountBindingsMessage]]()
        for node in cluster.nodes {
            let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "account-test")
            answers.append(try await client.accounts(AccountQuery(scope: .vendor("com.v"), subject: .account("alice"))))
            await client.close()
        }
        #expect(answers[0] == answers[1] && answers[1] == answers[2], "\(answers)")
        #expect(answers[0].first?.bound.map(\.deviceID) == [phone])
        #expect(answers[0].first?.unbound.map(\.deviceID) == [tablet])
        #expect(answers[0].first?.unbound.first?.reason == .refused)
        // Now every node knows the binding, a bind of the tablet is rejected on any of them.
        let retried = try await b.bind(account: "alice", deviceID: tablet, scope: .vendor("com.v"))
        #expect(retried.outcome == .rejected && retried.account?.bound.map(\.deviceID) == [phone])
    }

    /// registryload binds and moves accounts through all three nodes of a cluster, each account's
    /// requests through one of them; `--verify` then asks every node for every account and wants
    /// the device its last move left it on.
    @Test func registryloadBindsAndMovesAcrossAClusterAndEveryNodeAgrees() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let reportPath = temp.path + "/cluster-accounts.json"
        let result = try run(
            Binaries.path("registryload"),
            [
                "--endpoints", cluster.endpoints, "--connections", "3", "--in-flight", "8", "--requests", "2000", "--warmup", "0s",
                "--workload", "first-install=30,bind=30,move=40", "--seed", "12", "--verify", "--verify-wait", "30s", "--json", reportPath,
            ], timeout: 120)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportPath)))
        let json = try #require(object as? [String: Any])
        let verification = try #require(json["verification"] as? [String: Any])
        #expect((verification["accounts"] as? Int ?? 0) > 50, "\(verification)")
        #expect(verification["lost"] as? Int == 0 && verification["mismatched"] as? Int == 0 && verification["failed_lookups"] as? Int == 0)
        #expect((json["throughput"] as? [String: Any])?["failed"] as? Int == 0)
        _ = try await cluster.converged(within: 20)
    }
}
