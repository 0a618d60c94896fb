import Foundation
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Testing

/// `--max-connections`: a connection past the limit is refused with a retryable, typed error in
/// place of the hello's answer, the connections already held go on, and a place freed is taken
/// again.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ConnectionLimitTests {
    @Test func aConnectionPastTheLimitIsRefusedAndTheHeldOnesGoOn() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--max-connections", "2"])
        defer { node.stop() }
        let endpoint = try Endpoint(parsing: node.endpoint)
        let first = try await RegistryClient.connect(to: endpoint, clientName: "limit-test")
        let second = try await RegistryClient.connect(to: endpoint, clientName: "limit-test")

        let third = await Self.refusal(connecting: endpoint)
        #expect(third?.code == .tooManyConnections && third?.retryable == true, "a third connection past --max-connections 2: \(String(describing: third))")
        #expect(third?.message.contains("--max-connections") == true)
        // registryctl says what refused it, as a server error.
        let refused = try run(Binaries.path("registryctl"), ["status"], environment: ["REGISTRY_ENDPOINT": node.endpoint])
        #expect(refused.status == 1 && refused.stderr.contains("too_many_connections"), "\(refused.status) \(refused.stderr)")

        // The connections held go on.
        let one = try await first.register(RegisterRequest(bundleID: "com.limit.app", keychain: UUID().uuidString))
        let two = try await second.register(RegisterRequest(bundleID: "com.limit.app", keychain: UUID().uuidString))
        #expect(one.created && two.created)

        // A place freed is taken again.
        await first.close()
        let again = try await Self.connectOnceFree(endpoint)
        let three = try await again.register(RegisterRequest(bundleID: "com.limit.app", keychain: UUID().uuidString))
        #expect(three.created)
        await again.close()
        await second.close()
        let stats = try run(Binaries.path("registryctl"), ["status", "--output", "json"], environment: ["REGISTRY_ENDPOINT": node.endpoint])
        #expect(stats.status == 0 && stats.stdout.contains("too_many_connections"), "\(stats.stdout)")
    }

    /// Both ends of a client's connection probe a silent peer (TCP keepalive, 60 s idle): a
    /// client whose host died stops holding a place, and a client waiting on a node whose host
    /// died is told. `ss` shows each socket's keepalive timer.
    @Test func bothEndsOfAClientsConnectionKeepItAlive() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path)
        defer { node.stop() }
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "keepalive-test")
        _ = try await client.stats()
        let port = node.endpoint.split(separator: ":").last!
        // A socket with bytes in flight shows its retransmission timer instead, for a moment.
        var sockets = try run("/usr/bin/env", ["ss", "-tnoH", "state", "established", "( sport = :\(port) or dport = :\(port) )"])
        for _ in 0..<50 where !sockets.stdout.split(separator: "\n").allSatisfy({ $0.contains("timer:(keepalive") }) {
            try await Task.sleep(for: .milliseconds(100))
            sockets = try run("/usr/bin/env", ["ss", "-tnoH", "state", "established", "( sport = :\(port) or dport = :\(port) )"])
        }
        let lines = sockets.stdout.split(separator: "\n")
        #expect(sockets.status == 0 && lines.count == 2, "\(sockets.stdout) \(sockets.stderr)")
        #expect(lines.allSatisfy { $0.contains("timer:(keepalive") }, "\(sockets.stdout)")
        await client.close()
    }

    /// The node raises its soft limit of open files to the hard one, and warns when
    /// `--max-connections` does not fit under it.
    @Test func theOpenFilesLimitIsRaisedAndOneTooSmallIsWarnedOf() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        func openFiles(_ node: DaemonProcess) -> [Substring] {
            let limits = (try? String(contentsOfFile: "/proc/\(node.process.processIdentifier)/limits", encoding: .utf8)) ?? ""
            let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
            return line.split(separator: " ").dropFirst(3).prefix(2).map { $0 }
        }
        let warning = "--max-connections does not fit under the limit of open files"
        for name in ["roomy", "tight"] { try FileManager.default.createDirectory(atPath: temp.path + "/" + name, withIntermediateDirectories: false) }
        let roomy = try DaemonProcess(
            dataDirectory: temp.path + "/roomy", arguments: ["--max-connections", "2000"], launcher: ["/usr/bin/prlimit", "--nofile=64:4096", "--"])
        #expect(openFiles(roomy) == ["4096", "4096"])
        #expect(!roomy.log.contains(warning))
        #expect(roomy.stop() == 0)
        let tight = try DaemonProcess(
            dataDirectory: temp.path + "/tight", arguments: ["--max-connections", "2000"], launcher: ["/usr/bin/prlimit", "--nofile=64:1024", "--"])
        #expect(openFiles(tight) == ["1024", "1024"])
        #expect(tight.log.contains(warning) && tight.log.contains("open_files_limit=1024"), "\(tight.log)")
        #expect(tight.stop() == 0)
    }

    static func attempt(_ endpoint: Endpoint) async -> Result<RegistryClient, RegistryClientError> {
        do {
            return .success(try await RegistryClient.connect(to: endpoint, clientName: "limit-test"))
        } catch {
            return .failure(error)
        }
    }

    /// What refused a connection to `endpoint`; nil when it was served (and closed at once).
    static func refusal(connecting endpoint: Endpoint) async -> WireError? {
        switch await attempt(endpoint) {
        case .success(let client):
            await client.close()
            return nil
        case .failure(.server(let error)):
            return error
        case .failure(let error):
            return WireError(code: .internalError, message: "not refused by the node: \(error)")
        }
    }

    /// Connects, trying again while the node refuses for too many connections: a closed
    /// connection leaves the node's count once the node has seen it close. Gives up after 10 s.
    static func connectOnceFree(_ endpoint: Endpoint) async throws -> RegistryClient {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(10))
        while true {
            switch await attempt(endpoint) {
            case .success(let client):
                return client
            case .failure(.server(let error)) where error.code == .tooManyConnections && clock.now < deadline:
                try await Task.sleep(for: .milliseconds(50))
            case .failure(let error):
                throw error
            }
        }
    }
}
