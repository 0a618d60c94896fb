import Foundation
import RegistryCore
import RegistryTestSupport
import Testing
@testable import RegistryServer

@Suite struct ConfigurationTests {
    func withConfig(_ text: String, _ body: (String) throws -> Void) throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let path = temp.path + "/registryd.json"
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try body(path)
    }

    @Test func theExampleDeployConfigIsAccepted() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../deploy/registryd.json").path
        var configuration = NodeConfiguration()
        try configuration.apply(configFile: path)
        #expect(configuration.nodeID?.value == "node-a")
        let bundle = try BundleID(parsing: "uk.co.bbc.iplayer")
        #expect(configuration.vendorRules.vendor(of: bundle).name == "uk.co.bbc")
        #expect(configuration.vendorRules.vendor(of: try BundleID(parsing: "net.acmecdn.player")).name == "acme")
    }

    @Test func everyKeyIsApplied() throws {
        try withConfig(
            """
            {"host": "127.0.0.2", "port": 9000, "dataDir": "/tmp/x", "nodeId": "n-2", "clusterId": "prod",
             "maxFrameBytes": 4096, "maxBatchSize": 10, "maxInFlight": 7, "drainTimeoutSeconds": 2.5,
             "eventLoopThreads": 3, "expectedDevices": 5000000, "commitDelayMicros": 350, "moveJournalBelow": 5000, "journalSpares": 12, "vendorDefaultDepth": 3, "vendors": [{"name": "acme", "prefixes": ["com.acme", "net.acmecdn"]}]}
            """
        ) { path in
            var configuration = NodeConfiguration()
            try configuration.apply(configFile: path)
            #expect(configuration.host == "127.0.0.2" && configuration.port == 9000 && configuration.dataDirectory == "/tmp/x")
            #expect(configuration.nodeID?.value == "n-2" && configuration.clusterID == "prod")
            #expect(configuration.limits.maxFrameBytes == 4096 && configuration.limits.maxBatchSize == 10)
            #expect(configuration.limits.maxInFlight == 7 && configuration.drainTimeoutSeconds == 2.5)
            #expect(configuration.vendorRules.defaultDepth == 3 && configuration.eventLoopThreads == 3)
            #expect(configuration.expectedDevices == 5_000_000)
            #expect(configuration.commitPacing == CommitPacing(delayMicros: 350, worthOperations: 400))
            #expect(configuration.moveJournalBelowOperationsPerSecond == 5_000)
            #expect(configuration.journalSpares == 12)
        }
    }

    @Test(arguments: [
        ("{\"port\": ", "not valid JSON"),
        ("[1, 2]", "should be"),
        ("{\"port\": \"7400\"}", ".port should be Int"),
        ("{\"port\": 70000}", "port 70000"),
        ("{\"eventLoopThreads\": 0}", "event-loop threads 0"),
        ("{\"expectedDevices\": -1}", "expectedDevices: expected devices -1 is not 0...1073741824"),
        ("{\"expectedDevices\": 1073741825}", "expected devices 1073741825"),
        ("{\"commitDelayMicros\": -5}", "commitDelayMicros: commit delay -5 µs is not 0...10000"),
        ("{\"commitDelayMicros\": 10001}", "commit delay 10001 µs"),
        ("{\"commitDelayMicros\": \"soon\"}", ".commitDelayMicros should be Int"),
        ("{\"moveJournalBelow\": -1}", "moveJournalBelow: journal-moving rate -1 operations/s is not 0...10000000"),
        ("{\"moveJournalBelow\": 10000001}", "journal-moving rate 10000001"),
        ("{\"moveJournalBelow\": \"idle\"}", ".moveJournalBelow should be Int"),
        ("{\"journalSpares\": 0}", "journalSpares: journal spares 0 is not 1...4096"),
        ("{\"journalSpares\": 4097}", "journal spares 4097"),
        ("{\"nodeId\": \"Node A\"}", "node ID"),
        ("{\"vendors\": [{\"name\": \"x\", \"prefixes\": [\"com\"]}]}", "vendors:"),
        ("{\"vendors\": [{\"name\": \"x\"}]}", "missing key .vendors[0].prefixes"),
        ("{\"maxFrameBytes\": 1}", "maxFrameBytes"),
        ("{\"maxInFlight\": 0}", "maxInFlight"),
    ])
    func badConfigFilesAreTypedErrors(_ text: String, _ fragment: String) throws {
        try withConfig(text) { path in
            var configuration = NodeConfiguration()
            do {
                try configuration.apply(configFile: path)
                Issue.record("accepted \(text)")
            } catch {
                #expect("\(error)".contains(fragment), "\(error)")
            }
        }
    }

    @Test func aMissingConfigFileIsUnreadable() {
        var configuration = NodeConfiguration()
        #expect {
            try configuration.apply(configFile: "/nonexistent/registryd.json")
        } throws: { error in
            guard let error = error as? ConfigurationError, case .unreadable = error else { return false }
            return true
        }
    }
}
