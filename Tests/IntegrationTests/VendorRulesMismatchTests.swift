import Foundation
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Testing

/// Two nodes with different vendor rules would file one IDFV under two vendors, and the two IDs
/// would never merge: they refuse each other instead.
@Suite(.serialized, .timeLimit(.minutes(2))) struct VendorRulesMismatchTests {
    @Test func nodesWithOtherVendorRulesRefuseEachOther() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let config = temp.path + "/acme.json"
        try Data(#"{"vendors": [{"name": "acme", "prefixes": ["com.acme", "net.acmecdn"]}]}"#.utf8).write(to: URL(fileURLWithPath: config))
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
                    arguments: ["--node-id", name, "--cluster-secret", "s3cret", "--peers", peers] + (index == 0 ? ["--config", config] : [])))
        }
        let deadline = Date().addingTimeInterval(20)
        var errors = [String]()
        while Date() < deadline {
            let a = try await ClusterTests.stats(nodes[0].endpoint)
            let b = try await ClusterTests.stats(nodes[1].endpoint)
            errors = (a.peers + b.peers).filter { $0.state != "own-address" }.map(\.lastError)
            if errors.count == 2, errors.allSatisfy({ $0.contains("vendor rules") }) { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(errors.count == 2 && errors.allSatisfy { $0.contains("vendor rules") }, "\(errors)")
        let stats = try await ClusterTests.stats(nodes[1].endpoint)
        #expect((stats.errors[.vendorRulesMismatch] ?? 0) > 0, "\(stats.errors)")
        #expect(stats.peers.allSatisfy { $0.state != "streaming" })
    }
}
