import Foundation
import RegistryTestSupport
import Testing
import Platform

/// `registryctl` against a real `registryd` process.
@Suite(.serialized, .timeLimit(.minutes(5))) struct RegistryctlTests {
    func ctl(_ arguments: [String], endpoint: String?) throws -> CommandResult {
        try run(Binaries.path("registryctl"), arguments, environment: endpoint.map { ["REGISTRY_ENDPOINT": $0] } ?? [:])
    }

    func json(_ result: CommandResult) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        return try #require(object as? [String: Any], "\(result.stdout)")
    }

    @Test func registerFindGetAndStatusAgainstARealNode() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path
        let node = try DaemonProcess(dataDirectory: directory, arguments: ["--node-id", "node-it"])
        defer { node.stop() }
        let endpoint = node.endpoint
        let fresh = try ctl(["status", "-o", "table"], endpoint: endpoint).stdout
        #expect(fresh.contains("no commits yet") && fresh.contains("snapshot         none yet"), "\(fresh)")
        let keychain = "AAAAAAAA-AAAA-4AAA-8AAA-AAAAAAAAAAAA"
        let idfv = "11111111-1111-4111-8111-111111111111"

        let byKeychain = try ctl(["register", "--bundle", "com.v.a", "--keychain", keychain], endpoint: endpoint)
        #expect(byKeychain.status == 0, "\(byKeychain.stderr)")
        let first = try json(byKeychain)
        #expect(first["created"] as? Bool == true && first["vendor"] as? String == "com.v")

        let byIDFV = try json(try ctl(["register", "--bundle", "com.v.b", "--idfv", idfv], endpoint: endpoint))
        let linked = try json(try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv, "--keychain", keychain, "-o", "json"], endpoint: endpoint))
        #expect(linked["deviceId"] as? String == first["deviceId"] as? String)
        #expect(linked["replacedDeviceIds"] as? [String] == [byIDFV["deviceId"] as! String])

        // The endpoint flag wins over the environment.
        let found = try ctl(["device", "find", "--endpoint", endpoint, "--vendor", "com.v", "--idfv", idfv], endpoint: "127.0.0.1:1")
        #expect(found.status == 0, "\(found.stderr)")
        let record = try json(found)
        #expect(record["deviceId"] as? String == first["deviceId"] as? String)
        #expect(record["aliases"] as? [String] == [byIDFV["deviceId"] as! String])
        #expect((record["apps"] as? [[String: Any]])?.compactMap { $0["bundleId"] as? String } == ["com.v.a", "com.v.b"])
        #expect(record["originNode"] as? String == "node-it")

        let alias = try json(try ctl(["device", "get", byIDFV["deviceId"] as! String], endpoint: endpoint))
        #expect(alias["deviceId"] as? String == first["deviceId"] as? String)

        let table = try ctl(["device", "get", first["deviceId"] as! String, "-o", "table"], endpoint: endpoint)
        #expect(table.stdout.contains("APP") && table.stdout.contains("com.v.b") && table.stdout.contains("on node-it"))

        let status = try json(try ctl(["status"], endpoint: endpoint))
        #expect(status["node"] as? String == "node-it")
        #expect(status["devices"] as? Int == 1 && status["aliases"] as? Int == 1 && status["claims"] as? Int == 2)
        let log = try #require(status["log"] as? [String: Any])
        #expect(log["operations"] as? Int == 3)
        // The version vector: this node's own log, all three operations held.
        let vector = try #require(status["versionVector"] as? [[String: Any]])
        #expect(vector.count == 1 && vector[0]["origin"] as? String == "node-it" && vector[0]["sequence"] as? Int == 3)
        #expect(vector[0]["epoch"] as? Int == log["epoch"] as? Int)
        // Every commit's journal write and fdatasync is counted, and the percentiles are ordered.
        let commitLatency = try #require(log["commitLatency"] as? [String: Int])
        #expect(commitLatency["count"] == log["commits"] as? Int && (log["commits"] as? Int ?? 0) >= 1)
        #expect((commitLatency["p50Micros"] ?? .max) <= (commitLatency["p99Micros"] ?? -1))
        // Three registrations' operations, each journaled with its entry's header: well over 100 bytes.
        #expect((log["journalBytes"] as? Int ?? 0) > 100 && log["journalFiles"] as? Int == 1)
        // No snapshot yet: the default takes one every million operations or hour.
        #expect(log["snapshotOperations"] as? Int == 0)
        let statusTable = try ctl(["status", "-o", "table"], endpoint: endpoint)
        #expect(statusTable.stdout.contains("commit time") && statusTable.stdout.contains("p99 <="))
        #expect(statusTable.stdout.contains("version vector") && statusTable.stdout.contains("node-it/"), "\(statusTable.stdout)")
        #expect(statusTable.stdout.contains(" B in 1 file (what the snapshots do not cover yet)"), "\(statusTable.stdout)")
        // Past 1,024 bytes the journal's size reads in KiB.
        for device in 1...6 {
            let idfv = "22222222-2222-4222-8222-00000000000\(device)"
            #expect(try ctl(["register", "--bundle", "com.w.a", "--idfv", idfv], endpoint: endpoint).status == 0)
        }
        let grown = try ctl(["status", "-o", "table"], endpoint: endpoint).stdout
        #expect(grown.contains(" KiB in 1 file"), "\(grown)")

        // A snapshot by hand: it covers all nine operations, and status says so.
        let snapshot = try ctl(["snapshot", "-o", "table"], endpoint: endpoint)
        #expect(snapshot.status == 0 && snapshot.stdout.contains("covers 9 operations"), "\(snapshot.stdout)\(snapshot.stderr)")
        let after = try json(try ctl(["status"], endpoint: endpoint))
        let afterLog = try #require(after["log"] as? [String: Any])
        #expect(afterLog["snapshotOperations"] as? Int == 9 && (afterLog["snapshotBytes"] as? Int ?? 0) > 100)
        // Nothing new since: another snapshot writes nothing.
        let again = try ctl(["snapshot", "-o", "table"], endpoint: endpoint)
        #expect(again.status == 0 && again.stdout.contains("nothing new since the last"), "\(again.stdout)")
    }

    @Test func watchPrintsJSONLinesAndResumesFromACursorItPrinted() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--cluster-id", "ctl-watch"])
        defer { node.stop() }
        let endpoint = node.endpoint
        // A watch from now, in the background: it prints its starting cursor (--progress), then
        // exits after three events.
        let watch = try BackgroundWatch(["--endpoint", endpoint, "-o", "json", "--progress", "--count", "3", "--vendor", "com.v"])
        let keychain = "BBBBBBBB-AAAA-4AAA-8AAA-AAAAAAAAAAAA"
        let idfv = "22222222-1111-4111-8111-111111111111"
        _ = try ctl(["register", "--bundle", "com.other.a", "--keychain", keychain], endpoint: endpoint)
        let first = try json(try ctl(["register", "--bundle", "com.v.a", "--keychain", keychain, "-o", "json"], endpoint: endpoint))
        let second = try json(try ctl(["register", "--bundle", "com.v.b", "--idfv", idfv, "-o", "json"], endpoint: endpoint))
        _ = try ctl(["register", "--bundle", "com.v.a", "--idfv", idfv, "--keychain", keychain], endpoint: endpoint)
        let (status, lines) = watch.finish()
        #expect(status == 0)
        let objects = try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], "\($0)") }
        let start = try #require(objects.first?["cursor"] as? String, "\(lines)")
        let events = objects.filter { $0["kind"] != nil }
        #expect(events.map { $0["kind"] as? String } == ["created", "created", "merged"], "\(lines)")
        #expect(events[0]["device_id"] as? String == first["deviceId"] as? String && events[1]["device_id"] as? String == second["deviceId"] as? String)
        #expect(events.allSatisfy { $0["vendor"] as? String == "com.v" }, "the vendor filter holds: \(lines)")
        #expect(objects.last?["cursor"] != nil, "a cursor after the last event: \(lines)")

        // From the cursor it started at: the same three events again.
        let again = try ctl(["watch", "--from", start, "-o", "json", "--count", "3", "--vendor", "com.v"], endpoint: endpoint)
        #expect(again.status == 0, "\(again.stderr)")
        let replayed = again.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(replayed.compactMap { $0["device_id"] as? String } == events.compactMap { $0["device_id"] as? String })
        // A cursor of another cluster, and one that does not parse.
        let foreign = try ctl(["watch", "--from", "theirs@", "--count", "1"], endpoint: endpoint)
        #expect(foreign.status == 1 && foreign.stderr.contains("invalid_cursor"), "\(foreign.stderr)")
        #expect(try ctl(["watch", "--from", "no-at-sign", "--count", "1"], endpoint: endpoint).status == 64)
    }

    @Test func exitStatusesAreTheDocumentedOnes() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path
        let node = try DaemonProcess(dataDirectory: directory)
        defer { node.stop() }

        let notFound = try ctl(["device", "get", "00000000-0000-4000-8000-000000000001"], endpoint: node.endpoint)
        #expect(notFound.status == 3 && notFound.stderr.contains("not_found"))
        let refused = try ctl(["register", "--bundle", "nodots", "--idfv", "11111111-1111-4111-8111-111111111111"], endpoint: node.endpoint)
        #expect(refused.status == 1 && refused.stderr.contains("invalid_bundle_id"))
        let badUUID = try ctl(["device", "get", "xyz"], endpoint: node.endpoint)
        #expect(badUUID.status == 1 && badUUID.stderr.contains("invalid_device_id"))
        let unreachable = try ctl(["status"], endpoint: "127.0.0.1:1")
        #expect(unreachable.status == 69 && unreachable.stderr.contains("cannot reach"))
        let badEndpoint = try ctl(["status"], endpoint: "no-port")
        #expect(badEndpoint.status == 64)
        // `cluster status` too: a bad endpoint is a usage error, not a node that does not answer.
        let clusterBadEndpoint = try ctl(["cluster", "status"], endpoint: "no-port")
        #expect(clusterBadEndpoint.status == 64 && clusterBadEndpoint.stderr.contains("invalid endpoint"), "\(clusterBadEndpoint.stderr)")
        let unknownFlag = try ctl(["status", "--frobnicate"], endpoint: node.endpoint)
        #expect(unknownFlag.status == 64)
        let missing = try ctl(["register", "--bundle", "com.v.a"], endpoint: node.endpoint)
        #expect(missing.status == 64 && missing.stderr.contains("--idfv"))
        let help = try ctl(["--help"], endpoint: nil)
        #expect(help.status == 0 && help.stdout.contains("Exit status"))
    }

    /// A socket that accepts and never answers: the tool gives up after --timeout (or
    /// $REGISTRY_TIMEOUT) with its own status and message, instead of hanging.
    @Test func aNodeThatNeverAnswersTimesOut() throws {
        let (listener, port) = try #require(boundLoopbackSocket())
        defer { close(listener) }
        try #require(listen(listener, 8) == 0)
        // The kernel completes the handshakes from the backlog; nothing ever reads or writes.
        let endpoint = "127.0.0.1:\(port)"
        let started = Date()
        let timedOut = try ctl(["status", "--timeout", "0.5"], endpoint: endpoint)
        #expect(timedOut.status == 75 && timedOut.stderr.contains("no answer from \(endpoint) within 0.5 s"), "\(timedOut.stderr)")
        #expect(Date().timeIntervalSince(started) < 20)
        let fromEnvironment = try run(
            Binaries.path("registryctl"), ["device", "get", "00000000-0000-4000-8000-000000000001"],
            environment: ["REGISTRY_ENDPOINT": endpoint, "REGISTRY_TIMEOUT": "0.3"])
        #expect(fromEnvironment.status == 75, "\(fromEnvironment.stderr)")
        let bad = try ctl(["status", "--timeout", "0"], endpoint: endpoint)
        #expect(bad.status == 64 && bad.stderr.contains("the timeout must be"))
        // `cluster status` and `cluster verify` list such a node as unreachable (69) once the
        // timeout passes, where they waited for its answer for ever.
        let clusterStarted = Date()
        let status = try ctl(["cluster", "status", "--timeout", "0.5"], endpoint: endpoint)
        #expect(status.status == 69 && status.stdout.contains(endpoint), "\(status.stdout) \(status.stderr)")
        let verify = try ctl(["cluster", "verify", "--timeout", "0.5", "--wait", "1"], endpoint: endpoint)
        #expect(verify.status == 69, "\(verify.stdout) \(verify.stderr)")
        #expect(Date().timeIntervalSince(clusterStarted) < 30)
    }

    /// Each program names its release and the git revision it was built from.
    @Test func everyProgramPrintsItsVersion() throws {
        for program in ["registryd", "registryctl", "registryload"] {
            let result = try run(Binaries.path(program), ["--version"])
            #expect(result.status == 0, "\(program): \(result.stderr)")
            let line = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(line.hasPrefix("\(program) 0.1.0 (git ") && line.hasSuffix(")"), "\(line)")
            #expect(!line.contains("git unknown"), "built from a git checkout, so the revision is known: \(line)")
        }
    }
}
