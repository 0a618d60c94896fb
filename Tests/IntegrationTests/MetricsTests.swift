import Foundation
import RegistryTestSupport
import Testing
import Platform

/// `--metrics-port` of a real node: the exposition passes Debian's `promtool`, a real
/// `prometheus` server scrapes it and answers a query, junk requests are refused and counted,
/// and the probes answer.
@Suite(.serialized, .timeLimit(.minutes(5))) struct MetricsTests {
    /// The port of registryd's "metrics on HOST:PORT" log line.
    static func metricsPort(in log: String) -> Int? {
        port(after: "metrics on ", in: log)
    }

    func node(_ temp: TemporaryDirectory) throws -> (DaemonProcess, Int) {
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--metrics-port", "0"])
        return (node, try #require(Self.metricsPort(in: node.log), "\(node.log)"))
    }

    func register(_ count: Int, at endpoint: String) throws {
        for index in 0..<count {
            let idfv = String(format: "%08x-1111-4111-8111-111111111111", index + 1)
            let result = try run(Binaries.path("registryctl"), ["register", "--bundle", "com.metrics.app", "--idfv", idfv, "--endpoint", endpoint])
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    @Test func theExpositionPassesPromtoolAndCountsWhatHappened() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let (node, port) = try node(temp)
        defer { node.stop() }
        #expect(try httpRequest(port: port, path: "/healthz") == (200, "ok\n"))
        #expect(try httpRequest(port: port, path: "/readyz") == (200, "ready\n"))
        try register(3, at: node.endpoint)
        _ = try run(Binaries.path("registryctl"), ["device", "get", "00000000-0000-7000-8000-000000000001", "--endpoint", node.endpoint])

        // Junk paths, methods and requests are refused, typed by status, and counted.
        #expect(try httpRequest(port: port, path: "/admin").status == 404)
        #expect(try httpRequest(port: port, path: "/../../etc/passwd").status == 404)
        #expect(try httpRequest(port: port, method: "DELETE", path: "/metrics").status == 405)
        #expect(try httpRequest(port: port, path: "", raw: Array("\u{01}\u{02} junk\r\n\r\n".utf8)).status == 400)

        let (status, exposition) = try httpRequest(port: port, path: "/metrics")
        #expect(status == 200)
        for line in [
            "registry_registrations_total{outcome=\"created\"} 3", "registry_errors_total{code=\"not_found\"} 1",
            "registry_http_rejections_total{reason=\"not_found\"} 2", "registry_http_rejections_total{reason=\"method_not_allowed\"} 1",
            "registry_http_rejections_total{reason=\"bad_request\"} 1", "registry_request_duration_seconds_count 4", "registry_ready 1.0",
            "registry_log_operations 3.0",
        ] {
            #expect(exposition.contains(line + "\n"), "missing \(line)")
        }
        for family in ["registry_commit_duration_seconds_bucket", "registry_commit_operations_bucket", "registry_snapshot_age_seconds", "registry_log_bytes"] {
            #expect(exposition.contains(family), "missing \(family)")
        }
        // Every family has help text from the catalog, which promtool's lint asks for.
        let lines = exposition.split(separator: "\n")
        for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE ") {
            let name = line.dropFirst(7).prefix { $0 != " " }
            #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "\(name) has no help text")
        }
        let file = temp.path + "/metrics.prom"
        try exposition.write(toFile: file, atomically: true, encoding: .utf8)
        let lint = try run("/bin/sh", ["-c", "promtool check metrics < \(file)"])
        #expect(lint.status == 0, "\(lint.stdout)\(lint.stderr)")
    }

    @Test func aPrometheusServerScrapesTheNodeAndAnswersAQuery() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let (node, port) = try node(temp)
        defer { node.stop() }
        try register(5, at: node.endpoint)

        let free = try #require(boundLoopbackSocket())
        close(free.descriptor)
        let config = temp.path + "/prometheus.yml"
        try """
            global:
              scrape_interval: 1s
            scrape_configs:
              - job_name: registry
                static_configs:
                  - targets: ["127.0.0.1:\(port)"]
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let prometheus = Process()
        prometheus.executableURL = URL(fileURLWithPath: "/usr/bin/prometheus")
        prometheus.arguments = [
            "--config.file=\(config)", "--storage.tsdb.path=\(temp.path)/tsdb", "--web.listen-address=127.0.0.1:\(free.port)",
        ]
        prometheus.standardOutput = FileHandle.nullDevice
        prometheus.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try prometheus.run()
        defer { end(prometheus, grace: 10) }

        // Prometheus's HTTP API, until its scrape shows the 5 registrations (at most 60 s).
        let query = "/api/v1/query?query=registry_registrations_total%7Boutcome%3D%22created%22%7D"
        var value: String?
        let deadline = Date().addingTimeInterval(60)
        while value != "5" && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.5)
            guard let (status, body) = try? httpRequest(port: free.port, path: query), status == 200,
                let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
                let data = object["data"] as? [String: Any], let result = (data["result"] as? [[String: Any]])?.first,
                let sample = result["value"] as? [Any]
            else { continue }
            value = sample.last as? String
        }
        #expect(value == "5", "prometheus never reported 5 created registrations")
    }
}
