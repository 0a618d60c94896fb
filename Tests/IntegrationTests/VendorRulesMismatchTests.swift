import Foundation
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Testing

/// The cluster's vendor rules on real processes: nodes started with different config files agree
/// on the first start's rules; a rule added on one node files the next registrations on every
/// node under it, over connections opened before it, without a restart; a move asked for joins a
/// vendor's registered devices to the rule's on every node; only a different default depth still
/// makes two nodes refuse each other.
@Suite(.serialized, .timeLimit(.minutes(5))) struct VendorRulesMismatchTests {
    func ctl(_ arguments: [String], endpoint: String) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments + ["-o", "json", "--timeout", "30"], environment: ["REGISTRY_ENDPOINT": endpoint])
    }

    func names(_ endpoint: String) throws -> [String] {
        let listed = try ctl(["vendor", "list"], endpoint: endpoint)
        let object = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any]
        return (object?["rules"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
    }

    @Test func nodesWithOtherFilesKeepTheFirstStartsRulesAndAChangeReachesEveryNodeWithoutARestart() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let acme = temp.path + "/acme.json"
        try Data(#"{"vendors": [{"name": "acme", "prefixes": ["com.acme", "net.acmecdn"]}]}"#.utf8).write(to: URL(fileURLWithPath: acme))
        let other = temp.path + "/other.json"
        try Data(#"{"vendors": [{"name": "other", "prefixes": ["org.other"]}]}"#.utf8).write(to: URL(fileURLWithPath: other))
        let ports = try (0..<2).map { _ in try ClusterTests.freePort() }
        let peers = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
        var nodes = [DaemonProcess]()
        defer { for node in nodes { node.stop() } }
        func start(_ index: Int, config: String) throws -> DaemonProcess {
            let name = ["node-a", "node-b"][index]
            let directory = temp.path + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return try DaemonProcess(
                dataDirectory: directory, port: ports[index], arguments: ["--node-id", name, "--cluster-secret", "s3cret", "--peers", peers, "--config", config])
        }
        // node-a starts first: its seed is the cluster's. node-b's file says otherwise.
        nodes.append(try start(0, config: acme))
        nodes.append(try start(1, config: other))
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)
        for node in nodes { #expect(try names(node.endpoint) == ["acme"], "\(node.endpoint)") }

        // A connection to node-b opened before the change, used after it.
        let b = try await RegistryClient.connect(to: Endpoint(parsing: nodes[1].endpoint), clientName: "vendor-test")
        let news = try await b.register(RegisterRequest(bundleID: "uk.co.bbc.news", idfv: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)
        let added = try ctl(["vendor", "add", "--name", "bbc", "--prefix", "uk.co.bbc", "--prefix", "com.bbc"], endpoint: nodes[0].endpoint)
        #expect(added.status == 1 && added.stderr.contains("would move 1 registered device"), "\(added.stderr)")
        #expect(try ctl(["vendor", "add", "--name", "bbc", "--prefix", "com.bbc", "--prefix", "net.bbcstudios"], endpoint: nodes[0].endpoint).status == 0)
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)
        let viaB = try await b.register(RegisterRequest(bundleID: "com.bbc.iplayer", idfv: "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91"))
        #expect(viaB.vendor == "bbc")
        let a = try await RegistryClient.connect(to: Endpoint(parsing: nodes[0].endpoint), clientName: "vendor-test")
        let viaA = try await a.register(RegisterRequest(bundleID: "net.bbcstudios.kids", idfv: "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91"))
        #expect(viaA.vendor == "bbc" && viaA.deviceID == viaB.deviceID, "one vendor, one device, across the new rule's two prefixes")

        // The move refused above, asked for: uk.co.bbc joins bbc, and its device keeps its ID on
        // the other node, under the vendor it joined.
        let moved = try ctl(
            ["vendor", "set", "--name", "bbc", "--prefix", "com.bbc", "--prefix", "net.bbcstudios", "--prefix", "uk.co.bbc", "--move"],
            endpoint: nodes[0].endpoint)
        #expect(moved.status == 0 && moved.stdout.contains("uk.co.bbc"), "\(moved.stderr)")
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)
        let newsAgain = try await b.register(RegisterRequest(bundleID: "uk.co.bbc.news", idfv: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
        #expect(newsAgain.vendor == "bbc" && newsAgain.deviceID == news.deviceID && !newsAgain.created, "\(newsAgain), before: \(news)")
        await a.close()
        await b.close()

        // node-b restarted with its own file keeps the cluster's rules, and says so.
        #expect(nodes[1].stop() == 0)
        nodes[1] = try start(1, config: other)
        #expect(try names(nodes[1].endpoint) == ["acme", "bbc"])
        let listed = try ctl(["vendor", "list"], endpoint: nodes[1].endpoint)
        #expect(listed.stdout.contains("\"filedUnder\" : \"bbc\"") && listed.stdout.contains("uk.co.bbc"), "\(listed.stdout)")
        #expect(nodes[1].log.contains("the config file's vendors differ from the cluster's"))
    }

    /// A node decides a rule change from the devices it holds, so it first catches up with every
    /// other member (CatchUpBarrier). node-a restarts after node-b registered a device it has not
    /// seen, and node-b's link to it is still backing off: a change sent to node-a at once waits
    /// for that device, and is refused for the move it would need, not decided blind (which left
    /// the phone with a second ID under the new vendor).
    @Test func aChangeSentToANodeBehindItsPeersWaitsForTheDevicesItWouldMove() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let ports = try (0..<2).map { _ in try ClusterTests.freePort() }
        let peers = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
        var nodes = [DaemonProcess]()
        defer { for node in nodes { node.stop() } }
        func start(_ index: Int) throws -> DaemonProcess {
            let name = ["node-a", "node-b"][index]
            let directory = temp.path + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return try DaemonProcess(
                dataDirectory: directory, port: ports[index],
                arguments: ["--node-id", name, "--cluster-secret", "s3cret", "--peers", peers, "--causal-timeout", "20"])
        }
        nodes.append(try start(0))
        nodes.append(try start(1))
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)

        #expect(nodes[0].stop() == 0)
        let b = try await RegistryClient.connect(to: Endpoint(parsing: nodes[1].endpoint), clientName: "vendor-test")
        let news = try await b.register(RegisterRequest(bundleID: "uk.co.bbc.news", idfv: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
        #expect(news.vendor == "uk.co.bbc" && news.created)
        // node-b's link to node-a fails while it is down, and backs off for a second or more.
        try await Task.sleep(for: .seconds(2))
        nodes[0] = try start(0)
        // Sent as soon as node-a streams to node-b (a member it does not reach refuses the change).
        let streaming = try await poll(upTo: .seconds(20), every: .milliseconds(20)) { () async throws -> Bool in
            try await ClusterTests.stats(nodes[0].endpoint).peers.contains { $0.nodeID == "node-b" && $0.state == "streaming" }
        }
        #expect(streaming)
        let added = try ctl(["vendor", "add", "--name", "bbc", "--prefix", "uk.co.bbc"], endpoint: nodes[0].endpoint)
        #expect(added.status == 1 && added.stderr.contains("would move 1 registered device"), "status \(added.status): \(added.stdout) \(added.stderr)")
        #expect(try names(nodes[0].endpoint).isEmpty && names(nodes[1].endpoint).isEmpty, "no rule was added")

        // With the move asked for, the device joins the rule's vendor and keeps its ID.
        let moved = try ctl(["vendor", "add", "--name", "bbc", "--prefix", "uk.co.bbc", "--move"], endpoint: nodes[0].endpoint)
        #expect(moved.status == 0, "\(moved.stderr)")
        _ = try await ClusterTests.converged(nodes.map(\.endpoint), within: 20)
        let again = try await b.register(RegisterRequest(bundleID: "uk.co.bbc.news", idfv: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"))
        #expect(again.vendor == "bbc" && again.deviceID == news.deviceID && !again.created, "\(again), before: \(news)")
        await b.close()
    }

    @Test func nodesWithAnotherDefaultDepthRefuseEachOther() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let deep = temp.path + "/deep.json"
        try Data(#"{"vendorDefaultDepth": 3}"#.utf8).write(to: URL(fileURLWithPath: deep))
        let ports = try (0..<2).map { _ in try ClusterTests.freePort() }
        let peers = ports.map { "127.0.0.1:\($0)" }.joined(separator: ",")
        var nodes = [DaemonProcess]()
        defer { for node in nodes { node.stop() } }
        for (index, name) in ["node-a", "node-b"].enumerated() {
            let directory = temp.path + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            nodes.append(
                try DaemonProcess(
                    dataDirectory: directory, port: ports[index],
                    arguments: ["--node-id", name, "--cluster-secret", "s3cret", "--peers", peers] + (index == 0 ? ["--config", deep] : [])))
        }
        let deadline = Date().addingTimeInterval(20)
        var errors = [String]()
        while Date() < deadline {
            let a = try await ClusterTests.stats(nodes[0].endpoint)
            let b = try await ClusterTests.stats(nodes[1].endpoint)
            errors = (a.peers + b.peers).filter { $0.state != "own-address" }.map(\.lastError)
            if errors.count == 2, errors.allSatisfy({ $0.contains("default vendor scope") }) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(errors.count == 2 && errors.allSatisfy { $0.contains("default vendor scope") }, "\(errors)")
        let stats = try await ClusterTests.stats(nodes[1].endpoint)
        #expect((stats.errors[.vendorRulesMismatch] ?? 0) > 0, "\(stats.errors)")
        #expect(stats.peers.allSatisfy { $0.state != "streaming" })
    }

    /// The default vendor on a real process: the Public Suffix List names it, the list the node
    /// first served is pinned in its data directory, and a restart with a newer list that would
    /// move a registered device keeps the pinned one, says so, and answers with the same IDs.
    @Test func aNodeKeepsThePinnedListWhenANewerOneWouldMoveItsDevices() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let older = temp.path + "/older.dat"
        try Data("com\nuk\nco.uk\n".utf8).write(to: URL(fileURLWithPath: older))
        let newer = temp.path + "/newer.dat"
        try Data("com\nuk\nco.uk\nltd.uk\n".utf8).write(to: URL(fileURLWithPath: newer))
        let directory = temp.path + "/node-a"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let port = try ClusterTests.freePort()
        func start(list: String) throws -> DaemonProcess {
            try DaemonProcess(dataDirectory: directory, port: port, arguments: ["--node-id", "node-a", "--public-suffix-list", list])
        }
        func register(_ node: DaemonProcess, _ bundle: String, _ idfv: String) async throws -> RegisterResult {
            let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "vendor-test")
            defer { Task { await client.close() } }
            return try await client.register(RegisterRequest(bundleID: bundle, idfv: idfv))
        }
        let shopIDFV = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
        var node = try start(list: older)
        let bbc = try await register(node, "uk.co.bbc.iplayer", "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91")
        #expect(bbc.vendor == "uk.co.bbc")
        let shop = try await register(node, "uk.ltd.shop.app", shopIDFV)
        #expect(shop.vendor == "uk.ltd")
        #expect(node.stop() == 0)

        node = try start(list: newer)
        defer { node.stop() }
        #expect(node.log.contains("would move devices to other vendors; keeping the pinned one"), "\(node.log)")
        let again = try await register(node, "uk.ltd.shop.app", shopIDFV)
        #expect(again.vendor == "uk.ltd" && again.deviceID == shop.deviceID && !again.created)
        let listed = try ctl(["vendor", "list"], endpoint: node.endpoint)
        #expect(listed.stdout.contains("the public suffix list (3 rules"), "\(listed.stdout)")
    }
}
