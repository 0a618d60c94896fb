import Foundation
import Testing

/// The files under `deploy/`, checked offline by the tools that own their formats: the systemd
/// unit by `systemd-analyze`, the Kubernetes manifests by `kubernetes-validate` (strict, the
/// schemas it ships), the compose file by its structure. Each check is also run on a broken
/// copy, to show it can fail.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DeployTests {
    let deploy = Binaries.repository.appendingPathComponent("deploy").path

    /// `systemd-analyze verify` on the unit with ExecStart pointed at the built registryd (it
    /// checks that the program exists): no warning at all, and a low exposure score.
    func verifyUnit(_ text: String, in directory: String) throws -> (clean: Bool, output: String) {
        let path = directory + "/registryd.service"
        try text.replacingOccurrences(of: "/usr/local/bin/registryd", with: Binaries.path("registryd"))
            .write(toFile: path, atomically: true, encoding: .utf8)
        let result = try run("/usr/bin/systemd-analyze", ["verify", path])
        return (result.status == 0 && result.stderr.isEmpty && result.stdout.isEmpty, result.stdout + result.stderr)
    }

    @Test func theSystemdUnitVerifiesAndIsHardened() throws {
        let directory = NSTemporaryDirectory() + "registry-unit-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let unit = try String(contentsOfFile: deploy + "/systemd/registryd.service", encoding: .utf8)
        let verified = try verifyUnit(unit, in: directory)
        #expect(verified.clean, "\(verified.output)")
        for directive in ["DynamicUser=yes", "StateDirectory=registry", "ProtectSystem=strict", "NoNewPrivileges=yes", "CapabilityBoundingSet="] {
            #expect(unit.contains(directive + "\n"), "the unit lacks \(directive)")
        }
        let security = try run("/usr/bin/systemd-analyze", ["security", "--offline=true", directory + "/registryd.service"])
        let score = security.stdout.components(separatedBy: "Overall exposure level for registryd.service: ").last?.prefix { $0 != " " }
        let exposure = try #require(score.flatMap { Double($0) }, "\(security.stdout.suffix(300))")
        #expect(exposure <= 2.0, "exposure \(exposure)")
        // A misspelled key is caught.
        #expect(try !verifyUnit(unit.replacingOccurrences(of: "ProtectSystem=strict", with: "ProtectSystm=strict"), in: directory).clean)
    }

    @Test func theKubernetesManifestsValidateStrictly() throws {
        let manifests = try FileManager.default.contentsOfDirectory(atPath: deploy + "/kubernetes").filter { $0.hasSuffix(".yaml") }.sorted()
        #expect(manifests == ["configmap.yaml", "namespace.yaml", "poddisruptionbudget.yaml", "secret.yaml", "services.yaml", "statefulset.yaml"])
        let paths = manifests.map { deploy + "/kubernetes/" + $0 }
        let result = try run("/bin/sh", ["-c", "python3 -m kubernetes_validate --strict " + paths.joined(separator: " ")])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let statefulSet = try String(contentsOfFile: deploy + "/kubernetes/statefulset.yaml", encoding: .utf8)
        for required in ["replicas: 3", "readinessProbe:", "livenessProbe:", "volumeClaimTemplates:", "terminationGracePeriodSeconds: 60", "requests:"] {
            #expect(statefulSet.contains(required), "the StatefulSet lacks \(required)")
        }
        // A property the schema does not have fails strict validation.
        let broken = NSTemporaryDirectory() + "registry-broken-\(UUID().uuidString).yaml"
        defer { try? FileManager.default.removeItem(atPath: broken) }
        try statefulSet.replacingOccurrences(of: "terminationGracePeriodSeconds", with: "terminationGraceSeconds")
            .write(toFile: broken, atomically: true, encoding: .utf8)
        #expect(try run("/bin/sh", ["-c", "python3 -m kubernetes_validate --strict \(broken)"]).status != 0)
    }

    @Test func theComposeFileRunsThreeNodesEachWithItsVolume() throws {
        let script = """
            import sys, yaml
            compose = yaml.safe_load(open(sys.argv[1]))
            services = compose["services"]
            assert sorted(services) == ["node-a", "node-b", "node-c"], services
            for name, service in services.items():
                env = service["environment"]
                assert env["REGISTRY_NODE_ID"] == name and env["REGISTRY_PEERS"] == "node-a:7400,node-b:7400,node-c:7400", env
                assert service["volumes"] == [name + ":/data"], service["volumes"]
                assert service["build"]["dockerfile"] == "deploy/container/Containerfile"
            assert sorted(compose["volumes"]) == ["node-a", "node-b", "node-c"]
            print("ok")
            """
        let result = try run("/usr/bin/env", ["python3", "-c", script, deploy + "/compose.yaml"])
        #expect(result.status == 0 && result.stdout == "ok\n", "\(result.stderr)")
    }
}
