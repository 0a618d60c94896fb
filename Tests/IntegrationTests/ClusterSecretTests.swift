import Foundation
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing

/// No key derives from a public value: a single node makes its own random secret, and a node
/// that names peers must be given the cluster's.
@Suite(.serialized, .timeLimit(.minutes(5))) struct ClusterSecretTests {
    @Test func peersWithoutASecretAreRefusedWithExit78() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let refused = try run(
            Binaries.path("registryd"), ["--data-dir", temp.path, "--port", "0", "--peers", "127.0.0.1:1"], timeout: 30)
        #expect(refused.status == 78 && refused.stderr.contains("--cluster-secret") && refused.stderr.contains("openssl rand"), "\(refused.stderr)")
        // Nothing was written: the node refused before it opened its data directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: temp.path).isEmpty)
    }

    /// A single node without --cluster-secret makes a random secret on its first start, keeps it
    /// readable by its own user only, logs its fingerprint and never the secret, and keeps using
    /// it: identifiers hashed on the first run are found on the next.
    @Test func aSingleNodeMakesAndKeepsAPrivateRandomSecret() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path + "/node"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var node = try DaemonProcess(dataDirectory: directory, arguments: ["--cluster-id", "public-id"])
        let idfv = UUID128(high: 0xABC, low: 1).text
        var client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "secret")
        let registered = try await client.register(RegisterRequest(bundleID: "com.secret.app", idfv: idfv))
        await client.close()
        node.stop()

        let path = directory + "/cluster.secret"
        let secret = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(secret.count == 64 && secret != "public-id" && secret.allSatisfy(\.isHexDigit))
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode & 0o077 == 0, "cluster.secret is mode \(String(mode, radix: 8))")
        // So is every other file the node made (its journal, metadata, snapshots, lock).
        for file in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + file)
            guard attributes[.type] as? FileAttributeType == .typeRegular, let mode = attributes[.posixPermissions] as? Int else { continue }
            #expect(mode & 0o077 == 0, "\(file) is mode \(String(mode, radix: 8))")
        }
        #expect(!node.log.contains(secret) && node.log.contains("fingerprint"), "\(node.log)")

        node = try DaemonProcess(dataDirectory: directory, arguments: ["--cluster-id", "public-id"])
        defer { node.stop() }
        client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "secret")
        let found = try await client.lookup(
            LookupRequest(scope: .bundle("com.secret.app"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
        #expect(found.deviceID == registered.deviceID)
        await client.close()
    }
}
