import Foundation
import NIOSSL
import Platform
import RegistryTestSupport
import Testing

/// Nodes with `--tls-cert`, certificates made by `openssl`: clients verify the node, peers
/// verify each other (mutual TLS), and plaintext, untrusted clients and untrusted peers are
/// refused and counted.
@Suite(.serialized, .timeLimit(.minutes(5))) struct TLSTests {
    static let tokenSecret = "tls test token secret 0123456789"

    /// A CA and a node certificate it signed (for 127.0.0.1 and localhost, server and client
    /// use), as PEM files under `directory`, named `<name>-ca.pem`, `<name>.pem`, `<name>.key`.
    static func makeCertificates(_ name: String, in directory: String) throws {
        let script = """
            set -e
            cd '\(directory)'
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name)-ca.key -out \(name)-ca.pem -days 2 -subj /CN=\(name)-ca
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key -out \(name).csr -subj /CN=\(name)-node
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n' > \(name).ext
            openssl x509 -req -in \(name).csr -CA \(name)-ca.pem -CAkey \(name)-ca.key -CAcreateserial -out \(name).pem -days 2 -extfile \(name).ext
            """
        let result = try run("/bin/bash", ["-c", script])
        guard result.status == 0 else { throw TLSTestError("openssl failed: \(result.stderr)") }
    }

    /// Another certificate that `ca`'s CA signed, as `<name>.pem` and `<name>.key`.
    static func makeCertificate(_ name: String, signedBy ca: String, in directory: String) throws {
        let script = """
            set -e
            cd '\(directory)'
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key -out \(name).csr -subj /CN=\(name)
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,clientAuth\\n' > \(name).ext
            openssl x509 -req -in \(name).csr -CA \(ca)-ca.pem -CAkey \(ca)-ca.key -CAcreateserial -out \(name).pem -days 2 -extfile \(name).ext
            """
        let result = try run("/bin/bash", ["-c", script])
        guard result.status == 0 else { throw TLSTestError("openssl failed: \(result.stderr)") }
    }

    /// A relay that holds a certificate the cluster's CA signed, ending TLS on both sides and
    /// passing on what it reads, cannot carry a peer's handshake: the proofs cover the
    /// certificates each end saw, and each end saw the relay's. (Without that binding, on
    /// f895048, the relayed link streamed.)
    @Test func aRelayInTheMiddleCannotCarryAPeersHandshake() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let certs = temp.path
        try Self.makeCertificates("cluster", in: certs)
        try Self.makeCertificate("relay", signedBy: "cluster", in: certs)
        func context(server: Bool) throws -> NIOSSLContext {
            let chain = try NIOSSLCertificate.fromPEMFile("\(certs)/relay.pem").map { NIOSSLCertificateSource.certificate($0) }
            let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(file: "\(certs)/relay.key", format: .pem))
            var configuration = server
                ? TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: key) : TLSConfiguration.makeClientConfiguration()
            configuration.certificateChain = chain
            configuration.privateKey = key
            configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile("\(certs)/cluster-ca.pem"))
            configuration.certificateVerification = server ? .optionalVerification : .noHostnameVerification
            return try NIOSSLContext(configuration: configuration)
        }
        let ports = [try freePort(), try freePort()]
        let relay = try CuttableProxy(toPort: ports[0], terminatingTLS: (try context(server: true), try context(server: false)))
        defer { relay.close() }
        var nodes = [DaemonProcess]()
        defer { for node in nodes { node.stop() } }
        for (index, name) in ["node-a", "node-b"].enumerated() {
            try FileManager.default.createDirectory(atPath: "\(temp.path)/\(name)", withIntermediateDirectories: true)
            // node-b reaches node-a only through the relay; node-a names nobody.
            let peers = index == 1 ? ["--peers", "127.0.0.1:\(relay.port)"] : []
            nodes.append(
                try DaemonProcess(
                    dataDirectory: "\(temp.path)/\(name)", port: ports[index],
                    arguments: ["--node-id", name, "--cluster-secret", "s3cret"] + peers + tlsFlags("cluster", in: certs)))
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, !nodes[0].log.contains("did not prove the cluster secret") { try await Task.sleep(for: .milliseconds(100)) }
        #expect(nodes[0].log.contains("did not prove the cluster secret over this connection's challenge and certificates"), "\(nodes[0].log)")
        #expect(!nodes[0].log.contains("peer connected"), "the relayed handshake was accepted")
    }

    struct TLSTestError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func tlsFlags(_ name: String, ca: String = "cluster", in directory: String) -> [String] {
        ["--tls-cert", "\(directory)/\(name).pem", "--tls-key", "\(directory)/\(name).key", "--tls-ca", "\(directory)/\(ca)-ca.pem"]
    }

    func ctl(_ arguments: [String], endpoint: String, token: String, ca: String?) throws -> CommandResult {
        var environment = ["REGISTRY_ENDPOINT": endpoint, "REGISTRY_TOKEN": token]
        if let ca { environment["REGISTRY_TLS_CA"] = ca }
        return try run(Binaries.path("registryctl"), arguments, environment: environment)
    }

    func freePort() throws -> Int {
        let socket = try #require(boundLoopbackSocket())
        close(socket.descriptor)
        return socket.port
    }

    func handshakeFailures(metricsOf node: DaemonProcess) throws -> Int {
        let port = try #require(MetricsTests.metricsPort(in: node.log))
        let body = try httpRequest(port: port, path: "/metrics").body
        guard let line = body.split(separator: "\n").first(where: { $0.hasPrefix("registry_tls_handshake_failures_total ") }) else { return 0 }
        return Int(line.split(separator: " ")[1]) ?? 0
    }

    @Test func peersReplicateOverMutualTLSAndOutsidersAreRefusedAndCounted() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let certs = temp.path
        try Self.makeCertificates("cluster", in: certs)
        try Self.makeCertificates("rogue", in: certs)
        let token = try run(Binaries.path("registryctl"), ["token", "issue", "--all-vendors", "--role", "register", "--role", "read", "--role", "admin"],
            environment: ["REGISTRY_TOKEN_SECRET": Self.tokenSecret]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let ports = [try freePort(), try freePort(), try freePort()]
        let peers = "127.0.0.1:\(ports[0]),127.0.0.1:\(ports[1])"
        var nodes = [DaemonProcess]()
        defer { for node in nodes { node.stop() } }
        for (index, name) in ["node-a", "node-b"].enumerated() {
            try FileManager.default.createDirectory(atPath: "\(temp.path)/\(name)", withIntermediateDirectories: true)
            nodes.append(
                try DaemonProcess(
                    dataDirectory: "\(temp.path)/\(name)", port: ports[index],
                    arguments: ["--node-id", name, "--cluster-secret", "s3cret", "--peers", peers, "--token-secret", Self.tokenSecret,
                                "--metrics-port", "0"] + tlsFlags("cluster", in: certs)))
        }
        // A node whose certificate another CA signed, naming node-a as its peer. It trusts the
        // cluster's CA, so it accepts node-a's certificate: what keeps it out is node-a's check
        // of the certificate it presents.
        try FileManager.default.createDirectory(atPath: "\(temp.path)/node-r", withIntermediateDirectories: true)
        let rogue = try DaemonProcess(
            dataDirectory: "\(temp.path)/node-r", port: ports[2],
            arguments: ["--node-id", "node-r", "--cluster-secret", "s3cret", "--peers", "127.0.0.1:\(ports[0])", "--token-secret", Self.tokenSecret]
                + tlsFlags("rogue", ca: "cluster", in: certs))
        defer { rogue.stop() }

        let ca = "\(certs)/cluster-ca.pem"
        let registered = try ctl(["register", "--bundle", "com.tls.app", "--idfv", "11111111-1111-4111-8111-111111111111", "-o", "json"],
            endpoint: nodes[0].endpoint, token: token, ca: ca)
        #expect(registered.status == 0, "\(registered.stderr)")
        let device = try #require(
            (try JSONSerialization.jsonObject(with: Data(registered.stdout.utf8)) as? [String: Any])?["deviceId"] as? String)

        // It reaches node-b over the peers' mutual TLS.
        var replicated = false
        let deadline = Date().addingTimeInterval(20)
        while !replicated && Date() < deadline {
            replicated = try ctl(["device", "get", device], endpoint: nodes[1].endpoint, token: token, ca: ca).status == 0
            if !replicated { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(replicated, "node-b never held \(device)")
        // The peers' proofs covered the certificates both ends saw (ChannelBinding).
        #expect(nodes[1].log.contains("peer connected") && nodes[1].log.contains("bound_to_tls=true"), "\(nodes[1].log)")
        #expect(!nodes[1].log.contains("bound_to_tls=false"))

        // A watch over TLS: its hello waits for the handshake, which it reads for although the
        // watch reads only when asked (it hung there, as the hello's write never completed).
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: Binaries.path("registryctl"))
        watch.arguments = ["watch", "--count", "1"]
        watch.environment = ProcessInfo.processInfo.environment.merging(
            ["REGISTRY_ENDPOINT": nodes[0].endpoint, "REGISTRY_TOKEN": token, "REGISTRY_TLS_CA": ca]) { $1 }
        let watched = OutputFiles(for: watch)
        defer { watched.remove() }
        try watch.run()
        defer { if watch.isRunning { end(watch, grace: 1) } }
        // Watched from now: devices are made until the watch has seen one (it connects meanwhile).
        for round in 0..<40 where watch.isRunning {
            _ = try ctl(["register", "--bundle", "com.tls.app", "--idfv", String(format: "22222222-2222-4222-8222-%012d", round)],
                endpoint: nodes[0].endpoint, token: token, ca: ca)
            _ = waitForExit(of: watch, timeout: 0.5)
        }
        let status = end(watch, grace: 1)
        #expect(status == 0 && watched.stdout.contains("created"), "\(watched.stdout)\n\(watched.stderr)")

        // Plaintext to the TLS port, and a client that trusts another CA, are refused.
        let plaintext = try ctl(["status"], endpoint: nodes[0].endpoint, token: token, ca: nil)
        #expect(plaintext.status == 69, "\(plaintext.stderr)")
        let untrusting = try ctl(["status"], endpoint: nodes[0].endpoint, token: token, ca: "\(certs)/rogue-ca.pem")
        #expect(untrusting.status == 69 && untrusting.stderr.contains("TLS failed"), "\(untrusting.stderr)")
        // A watch says so too (it said the connection closed).
        let untrustingWatch = try ctl(["watch", "--count", "1"], endpoint: nodes[0].endpoint, token: token, ca: "\(certs)/rogue-ca.pem")
        #expect(untrustingWatch.status == 69 && untrustingWatch.stderr.contains("TLS failed"), "\(untrustingWatch.stderr)")

        // The rogue peer never gets in: node-a refuses its handshakes, and it holds nothing.
        Thread.sleep(forTimeInterval: 3)
        let outsider = try ctl(["device", "get", device], endpoint: rogue.endpoint, token: token, ca: "\(certs)/rogue-ca.pem")
        #expect(outsider.status == 3, "\(outsider.stderr)")
        // Plaintext, the untrusting client and the rogue peer (at least once) each failed a handshake.
        #expect(try handshakeFailures(metricsOf: nodes[0]) >= 3)
        #expect(nodes[0].log.contains("TLS handshake failed"))
    }

    @Test func tlsAndTokensLetANodeListenBeyondLoopbackAndBadFilesAreTypedErrors() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        try Self.makeCertificates("cluster", in: temp.path)
        try Self.makeCertificates("other", in: temp.path)
        let node = try DaemonProcess(
            dataDirectory: temp.path, arguments: ["--host", "0.0.0.0", "--token-secret", Self.tokenSecret] + tlsFlags("cluster", in: temp.path))
        #expect(node.stop() == 0)

        let registryd = Binaries.path("registryd")
        let base = ["--data-dir", temp.path, "--port", "0"]
        for (flags, words) in [
            (["--tls-cert", "\(temp.path)/cluster.pem", "--tls-ca", "\(temp.path)/cluster-ca.pem"], "needs --tls-key"),
            (["--tls-cert", "\(temp.path)/cluster.pem", "--tls-key", "\(temp.path)/cluster.key"], "needs --tls-ca"),
            (["--tls-cert", "\(temp.path)/missing.pem", "--tls-key", "\(temp.path)/cluster.key", "--tls-ca", "\(temp.path)/cluster-ca.pem"],
             "--tls-cert: cannot read"),
            (["--tls-cert", "\(temp.path)/cluster.pem", "--tls-key", "\(temp.path)/cluster.pem", "--tls-ca", "\(temp.path)/cluster-ca.pem"],
             "--tls-key"),
            (["--tls-cert", "\(temp.path)/cluster.pem", "--tls-key", "\(temp.path)/other.key", "--tls-ca", "\(temp.path)/cluster-ca.pem"],
             "--tls-key"),
        ] {
            let refused = try run(registryd, base + flags, timeout: 30)
            #expect(refused.status == 78 && refused.stderr.contains(words), "\(flags): \(refused.stderr)")
        }
    }
}
