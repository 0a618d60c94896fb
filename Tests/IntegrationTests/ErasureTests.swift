import Foundation
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing

/// Forgetting devices on real processes: a forget accepted while a member is down reaches it when
/// it comes back from its journal, and a member wiped after the journals were trimmed catches up
/// from a snapshot that holds the tombstone; in both, the device stays gone on every node.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ErasureTests {
    func ctl(_ arguments: [String], endpoint: String) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments + ["-o", "json", "--timeout", "30"], environment: ["REGISTRY_ENDPOINT": endpoint])
    }

    func json(_ result: CommandResult) throws -> [String: Any] {
        #expect(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(object as? [String: Any], "\(result.stdout)")
    }

    /// Every ID in `ids` answers GONE (exit 4) on every node of `endpoints`.
    func expectGone(_ ids: [String], on endpoints: [String]) throws {
        for endpoint in endpoints {
            for id in ids {
                let got = try ctl(["device", "get", id], endpoint: endpoint)
                #expect(got.status == 4 && got.stderr.contains("gone"), "\(id) on \(endpoint): \(got.status) \(got.stdout) \(got.stderr)")
            }
        }
    }

    @Test func aForgetStaysOnEveryNodeThroughAMemberThatWasDownAndOneWipedAfterTheJournalsWereTrimmed() async throws {
        let cluster = try ClusterTests.Cluster(extra: ["--journal-file-bytes", "65536", "--snapshot-every-operations", "0", "--snapshot-every-seconds", "0"])
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let endpoints = { cluster.nodes.map(\.endpoint) }
        let idfv = "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91"
        let keychain = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        let a = endpoints()[0]
        // A device with an alias (a keychain-only registration merged by a later one), bound to alice.
        let phone = try json(try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv], endpoint: a))["deviceId"] as! String
        let other = try json(try ctl(["register", "--bundle", "com.v.b", "--keychain", keychain], endpoint: a))["deviceId"] as! String
        let merged = try json(try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv, "--keychain", keychain], endpoint: a))["deviceId"] as! String
        #expect(phone != other && [phone, other].contains(merged))
        #expect(try json(try ctl(["account", "bind", "--vendor", "com.v", "--account", "alice", "--device", phone], endpoint: a))["outcome"] as? String == "bound")
        _ = try await cluster.converged(within: 30)

        // node-c is down while node-a forgets the device; node-b holds the forget before the answer.
        #expect(cluster.nodes[2].stop() == 0)
        let forgotten = try json(try ctl(["device", "forget", other, "--ack-replicas", "1"], endpoint: a))
        #expect(forgotten["outcome"] as? String == "forgotten" && forgotten["deviceId"] as? String == merged, "\(forgotten)")
        #expect(forgotten["aliases"] as? [String] == [[phone, other].first { $0 != merged }!])
        try expectGone([phone, other], on: Array(endpoints().prefix(2)))
        let again = try json(try ctl(["device", "forget", phone], endpoint: endpoints()[1]))
        #expect(again["outcome"] as? String == "already-gone")

        // node-c comes back from its journal: it missed the forget, and learns it from its peers.
        cluster.nodes[2] = try cluster.start(2)
        _ = try await cluster.converged(within: 30)
        try expectGone([phone, other], on: endpoints())
        // Every node's forget is in its journal file being written now, or an earlier one.
        let heldForget = try (0..<3).map { try ClusterTests.journalFiles(cluster.directory($0)).last ?? 0 }
        let alice = try ctl(["account", "show", "--vendor", "com.v", "--account", "alice"], endpoint: endpoints()[2])
        #expect(alice.status == 3, "alice's binding went with the device: \(alice.stdout)")

        // The app registers again, through node-c: a new device under a new ID, found everywhere.
        let fresh = try json(try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv, "--keychain", keychain], endpoint: endpoints()[2]))
        let freshID = try #require(fresh["deviceId"] as? String)
        #expect(fresh["created"] as? Bool == true && ![phone, other].contains(freshID), "\(fresh)")
        _ = try await cluster.converged(within: 30)
        for endpoint in endpoints() {
            let found = try json(try ctl(["device", "find", "--vendor", "com.v", "--idfv", idfv], endpoint: endpoint))
            #expect(found["deviceId"] as? String == freshID)
        }

        // Enough writes to fill several journal files, then snapshots on every node, twice, so
        // that each trims the journal files holding the forget.
        let load = try run(
            Binaries.path("registryload"),
            ["--endpoints", cluster.endpoints, "--connections", "3", "--threads", "1", "--requests", "3000", "--warmup", "0s", "--seed", "5"],
            timeout: 120)
        #expect(load.status == 0, "\(load.stdout)\n\(load.stderr)")
        // Snapshots on every node until node-a and node-c have each trimmed every journal file
        // that held the forget (a file goes once two snapshots cover it and every member holds
        // it, which each node learns within a second or so of the retention floor).
        _ = try await cluster.converged(within: 30)
        let deadline = Date().addingTimeInterval(60)
        var trimmed = false
        while !trimmed, Date() < deadline {
            try await Task.sleep(for: .milliseconds(1_000))
            for endpoint in endpoints() {
                // A write first, so that each snapshot covers more than the last, and the older
                // kept snapshot (a clean stop's, on node-c) stops holding the trim back.
                let fill = try ctl(["register", "--bundle", "com.v.fill", "--idfv", UUID().uuidString], endpoint: endpoint)
                let taken = try ctl(["snapshot"], endpoint: endpoint)
                #expect(fill.status == 0 && taken.status == 0)
            }
            trimmed = try [0, 2].allSatisfy { index in
                (try ClusterTests.journalFiles(cluster.directory(index)).first ?? 0) > heldForget[index]
            }
        }
        let now = try (0..<3).map { try ClusterTests.journalFiles(cluster.directory($0)) }
        #expect(trimmed, "node-a and node-c trimmed the journal files that held the forget: held \(heldForget), now \(now)")

        // node-b loses its data directory, and catches up from a peer's snapshot.
        _ = cluster.nodes[1].stop(signal: SIGKILL)
        try FileManager.default.removeItem(atPath: cluster.directory(1))
        try FileManager.default.createDirectory(atPath: cluster.directory(1), withIntermediateDirectories: true)
        cluster.nodes[1] = try cluster.start(1)
        let stats = try await cluster.converged(within: 60)
        #expect(stats[1].snapshotOperations > 0, "node-b installed a snapshot")
        try expectGone([phone, other], on: endpoints())
        let found = try json(try ctl(["device", "find", "--vendor", "com.v", "--idfv", idfv], endpoint: endpoints()[1]))
        #expect(found["deviceId"] as? String == freshID)
    }
}

/// `--erasure-within`: a node that is otherwise idle takes the snapshots that take a forgotten
/// device's bytes off its disk in time.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ErasureDeadlineTests {
    /// The files of `directory` holding `bytes` anywhere, by name.
    static func files(in directory: String, holding bytes: [UInt8]) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { name in
            guard let data = FileManager.default.contents(atPath: directory + "/" + name) else { return false }
            return data.withUnsafeBytes { raw in
                let haystack = raw.bindMemory(to: UInt8.self)
                guard haystack.count >= bytes.count else { return false }
                return (0...(haystack.count - bytes.count)).contains { start in
                    haystack[start] == bytes[0] && Array(haystack[start..<(start + bytes.count)]) == bytes
                }
            }
        }.sorted()
    }

    /// Waits, up to `seconds`, until `holding` names no file; returns what it names last.
    static func waitUntilNoFile(within seconds: TimeInterval, _ holding: () throws -> [String]) async throws -> [String] {
        let deadline = Date().addingTimeInterval(seconds)
        var left = try holding()
        while !left.isEmpty, Date() < deadline {
            try await Task.sleep(for: .milliseconds(250))
            left = try holding()
        }
        return left
    }

    /// The account key's 16 bytes as the journal stores them (protobuf: the UUID's bytes in
    /// order) and as snapshots do (each half little-endian).
    static func stored(_ uuid: UUID128) -> (journal: [UInt8], snapshot: [UInt8]) {
        (
            [uuid.high, uuid.low].flatMap { word in stride(from: 56, through: 0, by: -8).map { UInt8(truncatingIfNeeded: word >> UInt64($0)) } },
            [uuid.high, uuid.low].flatMap { word in stride(from: 0, through: 56, by: 8).map { UInt8(truncatingIfNeeded: word >> UInt64($0)) } }
        )
    }

    /// A bind made on a node cut off from the forget reaches the others after it: they drop it,
    /// but their journals hold it, and it goes from every node's disk within the deadline of its
    /// arrival, as a forget's records do. (Before, no erasure snapshot followed a late arrival,
    /// and the journal file kept it until it filled.)
    @Test func aBindThatArrivesAfterTheForgetGoesFromEveryNodesDiskOnTime() async throws {
        let (cluster, relays) = try ClusterTests.relayedCluster(
            isolating: 0, extra: ["--erasure-within", "4", "--snapshot-every-seconds", "0", "--snapshot-every-operations", "0"])
        defer {
            cluster.stop()
            for relay in relays { relay.close() }
        }
        let erasure = ErasureTests()
        let device = try erasure.json(
            try erasure.ctl(["register", "--bundle", "com.v.a", "--idfv", "7a2c1b9e-0b7d-4c3e-9a51-2d8e4f6a7b92"], endpoint: cluster.nodes[1].endpoint))["deviceId"] as! String
        _ = try await cluster.converged(within: 30)
        for relay in relays { relay.cut() }
        // Node A, cut off, binds; node B forgets meanwhile.
        let bound = try erasure.json(
            try erasure.ctl(["account", "bind", "--vendor", "com.v", "--account", "late-alice", "--device", device], endpoint: cluster.nodes[0].endpoint))
        let keyText = try #require((bound["account"] as? [String: Any])?["accountKey"] as? String)
        let key = try #require(UUID128(text: keyText))
        let bytes = Self.stored(key)
        #expect(try erasure.json(try erasure.ctl(["device", "forget", device], endpoint: cluster.nodes[1].endpoint))["outcome"] as? String == "forgotten")
        #expect(try Self.files(in: cluster.directory(1), holding: bytes.journal).isEmpty, "node B has not heard of the bind yet")
        // B and C take their erasure snapshots for the forget before the bind reaches them.
        let taken = Date().addingTimeInterval(30)
        while !(1...2).allSatisfy({ cluster.nodes[$0].log.contains("snapshot for erasure") }), Date() < taken {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect((1...2).allSatisfy { cluster.nodes[$0].log.contains("snapshot for erasure") }, "B and C took their erasure snapshots")
        for relay in relays { relay.heal() }
        // Converged, B and C hold A's log through the bind: it went through their journals (A's
        // journal keeps what they lack, so it did not come in a snapshot). How soon it leaves
        // them again is what is checked; it may have left already.
        _ = try await cluster.converged(within: 30)

        // Within the deadline (4 s) of its arrival, plus the snapshots' time, no node's files hold it.
        func holding() throws -> [String] {
            try (0..<3).flatMap { index in
                Set(try Self.files(in: cluster.directory(index), holding: bytes.journal) + Self.files(in: cluster.directory(index), holding: bytes.snapshot))
                    .map { "\(ClusterTests.Cluster.names[index])/\($0)" }
            }.sorted()
        }
        let left = try await Self.waitUntilNoFile(within: 40, holding)
        #expect(left.isEmpty, "still on disk in \(left)")
    }

    @Test func anIdleNodeErasesAForgottenDevicesBindingFromItsSnapshotsAndJournalOnTime() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(
            dataDirectory: temp.path, arguments: ["--node-id", "node-e", "--erasure-within", "4", "--snapshot-every-seconds", "0", "--snapshot-every-operations", "0"])
        defer { node.stop() }
        let erasure = ErasureTests()
        let device = try erasure.json(try erasure.ctl(["register", "--bundle", "com.v.a", "--idfv", "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91"], endpoint: node.endpoint))["deviceId"] as! String
        let bound = try erasure.json(try erasure.ctl(["account", "bind", "--vendor", "com.v", "--account", "alice", "--device", device], endpoint: node.endpoint))
        let key = try #require((bound["account"] as? [String: Any])?["accountKey"] as? String)
        let uuid = try #require(UUID128(text: key))
        let (inJournal, inSnapshot) = Self.stored(uuid)
        func holding() throws -> [String] {
            Array(Set(try Self.files(in: temp.path, holding: inJournal) + Self.files(in: temp.path, holding: inSnapshot))).sorted()
        }
        #expect(try Self.files(in: temp.path, holding: inJournal).contains { $0.hasPrefix("journal") }, "the binding is on disk before the forget")

        // An ordinary snapshot now: it holds the binding, and is kept.
        #expect(try erasure.ctl(["snapshot"], endpoint: node.endpoint).status == 0)
        #expect(try Self.files(in: temp.path, holding: inSnapshot).contains { $0.hasPrefix("snapshot") })
        #expect(try erasure.json(try erasure.ctl(["device", "forget", device], endpoint: node.endpoint))["outcome"] as? String == "forgotten")

        // Nothing else is written; within the deadline (4 s) and the erasure snapshot's time, no
        // file holds the binding any more.
        let left = try await Self.waitUntilNoFile(within: 30, holding)
        #expect(left.isEmpty, "still on disk in \(left)")
        #expect(node.log.contains("snapshot for erasure"))
        // The device stays gone after a restart from what is left.
        #expect(node.stop() == 0)
        let restarted = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "node-e", "--erasure-within", "4"])
        defer { restarted.stop() }
        let got = try erasure.ctl(["device", "get", device], endpoint: restarted.endpoint)
        #expect(got.status == 4, "\(got.stderr)")
    }
}
