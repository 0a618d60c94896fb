import Foundation
import RegistryTestSupport
import Testing
import Platform

/// A real `registryd` with `--token-secret`, driven by `registryctl` with tokens that
/// `registryctl token issue` made: vendor scopes, roles, every kind of bad token, and the
/// refusal to listen beyond loopback without `--insecure`.
@Suite(.serialized, .timeLimit(.minutes(5))) struct SecurityTests {
    static let secret = "integration token secret 0123456789"

    func ctl(_ arguments: [String], endpoint: String, token: String? = nil, secret: String? = nil) throws -> CommandResult {
        var environment = ["REGISTRY_ENDPOINT": endpoint]
        if let token { environment["REGISTRY_TOKEN"] = token }
        if let secret { environment["REGISTRY_TOKEN_SECRET"] = secret }
        return try run(Binaries.path("registryctl"), arguments, environment: environment)
    }

    func issue(_ arguments: [String], secret: String = SecurityTests.secret) throws -> String {
        let result = try ctl(["token", "issue"] + arguments, endpoint: "", secret: secret)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func json(_ result: CommandResult) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    }

    @Test func tokensScopeEveryRequestToTheirVendorsAndRoles() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--token-secret", Self.secret])
        defer { node.stop() }
        let endpoint = node.endpoint
        let acme = try issue(["--vendor", "com.acme", "--role", "register", "--role", "read", "--subject", "billing"])
        let operatorToken = try issue(["--all-vendors", "--role", "admin", "--role", "register", "--role", "read", "--expires-in", "1h"])
        let idfv = "11111111-1111-4111-8111-111111111111"

        let mine = try ctl(["register", "--bundle", "com.acme.app", "--idfv", idfv], endpoint: endpoint, token: acme)
        #expect(mine.status == 0, "\(mine.stderr)")
        let other = try ctl(["register", "--bundle", "com.other.app", "--idfv", idfv], endpoint: endpoint, token: acme)
        #expect(other.status == 1 && other.stderr.contains("permission_denied"), "\(other.stderr)")
        #expect(try ctl(["device", "find", "--vendor", "com.other", "--idfv", idfv], endpoint: endpoint, token: acme).stderr.contains("permission_denied"))

        // Another vendor's device ID is not found, exactly like an ID that does not exist.
        let theirs = try json(try ctl(["register", "--bundle", "com.other.app", "--idfv", idfv], endpoint: endpoint, token: operatorToken))
        let probe = try ctl(["device", "get", theirs["deviceId"] as! String], endpoint: endpoint, token: acme)
        #expect(probe.status == 3 && probe.stderr.contains("not_found"), "\(probe.stderr)")
        #expect(try ctl(["device", "get", theirs["deviceId"] as! String], endpoint: endpoint, token: operatorToken).status == 0)

        // Operator requests need admin.
        let status = try ctl(["status"], endpoint: endpoint, token: acme)
        #expect(status.status == 1 && status.stderr.contains("permission_denied"), "\(status.stderr)")

        // Missing, forged, malformed and expired tokens are refused at the hello.
        let forged = try issue(["--all-vendors", "--role", "admin"], secret: "some other secret 0123456789")
        let expiring = try issue(["--vendor", "com.acme", "--role", "read", "--expires-in", "1s"])
        Thread.sleep(forTimeInterval: 2.1)
        for (token, words) in [(nil, "requires a token"), (forged, "does not verify"), ("rgt1.junk", "malformed"), (expiring, "expired")] {
            let refused = try ctl(["device", "get", theirs["deviceId"] as! String], endpoint: endpoint, token: token)
            #expect(refused.status == 1 && refused.stderr.contains("unauthenticated") && refused.stderr.contains(words), "\(refused.stderr)")
        }

        // The token file serves as well as the variable; the node counted every refusal, and
        // kept the acknowledged registrations.
        let file = temp.path + "/operator.token"
        try (operatorToken + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let stats = try run(Binaries.path("registryctl"), ["status", "--token-file", file, "-o", "json"], environment: ["REGISTRY_ENDPOINT": endpoint])
        #expect(stats.status == 0, "\(stats.stderr)")
        let report = try json(stats)
        let errors = try #require(report["errors"] as? [String: Int], "\(report)")
        #expect(errors["permission_denied"] == 3 && errors["unauthenticated"] == 4 && errors["not_found"] == 1, "\(errors)")
        #expect(report["devices"] as? Int == 2)
    }

    @Test func listeningBeyondLoopbackTakesInsecure() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let refused = try run(Binaries.path("registryd"), ["--data-dir", temp.path, "--host", "0.0.0.0", "--port", "0"], timeout: 30)
        #expect(refused.status == 78 && refused.stderr.contains("--insecure"), "\(refused.stderr)")
        let withTokens = try run(
            Binaries.path("registryd"), ["--data-dir", temp.path, "--host", "0.0.0.0", "--port", "0", "--token-secret", Self.secret], timeout: 30)
        #expect(withTokens.status == 78 && withTokens.stderr.contains("no TLS"), "\(withTokens.stderr)")

        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--host", "0.0.0.0", "--insecure", "--log-format", "json"])
        defer { node.stop() }
        #expect(try ctl(["status"], endpoint: node.endpoint).status == 0)
        // Every log line is one JSON object, the warning among them.
        let lines = node.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        var warned = false
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            #expect(object["ts"] is String && object["level"] is String && object["message"] is String, "\(line)")
            if object["level"] as? String == "warning", (object["message"] as? String)?.contains("--insecure") == true { warned = true }
        }
        #expect(warned, "\(node.log)")
    }
}

/// registryd as an unprivileged user, as the systemd unit (DynamicUser) and the container run
/// it. A node once set SO_DEBUG where it meant TCP_NODELAY, which only root may set: run as
/// anyone else, it closed every connection.
@Suite(.serialized, .timeLimit(.minutes(5))) struct UnprivilegedNodeTests {
    @Test func aNodeRunAsNobodyServes() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        chmod(temp.path, 0o777)
        let launcher = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "nobody-node"], launcher: launcher)
        defer { node.stop() }
        let registered = try run(
            Binaries.path("registryctl"), ["register", "--bundle", "com.nobody.app", "--idfv", "11111111-1111-4111-8111-111111111111"],
            environment: ["REGISTRY_ENDPOINT": node.endpoint])
        #expect(registered.status == 0, "\(registered.stderr)")
        let status = try String(contentsOfFile: "/proc/\(node.process.processIdentifier)/status", encoding: .utf8)
        #expect(status.contains("Uid:\t65534"), "not running as nobody")
    }
}
