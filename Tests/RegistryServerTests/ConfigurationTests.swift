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
        #expect(
            configuration.vendorRules.bindingPolicy(of: Vendor(trusted: "acme"))
                == (try BindingPolicy(maxDevices: 2, activeWithinDays: 90, pastLimit: .replace)))
        #expect(configuration.vendorRules.bindingPolicy(of: Vendor(trusted: "uk.co.bbc")) == .default)
        #expect(configuration.vendorRules.bindingPolicy(of: Vendor(trusted: "com.unruled")) == .default)
        #expect(configuration.vendorRules.clonePolicy(of: Vendor(trusted: "acme")) == (try ClonePolicy(action: .split, windowDays: 7)))
        #expect(configuration.vendorRules.clonePolicy(of: Vendor(trusted: "uk.co.bbc")) == .default)
    }

    /// A binding policy is part of the rules: nodes whose policies differ have different
    /// fingerprints (so they refuse each other), and a default policy leaves the fingerprint as
    /// it was before policies existed.
    @Test func aBindingPolicyChangesTheVendorRulesFingerprint() throws {
        let plain = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"])])
        let defaulted = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"], binding: .default)])
        let two = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"], binding: try BindingPolicy(maxDevices: 2))])
        let replace = try VendorRules(
            rules: [VendorRule(name: "acme", prefixes: ["com.acme"], binding: try BindingPolicy(maxDevices: 2, pastLimit: .replace))])
        let windowed = try VendorRules(
            rules: [VendorRule(name: "acme", prefixes: ["com.acme"], binding: try BindingPolicy(maxDevices: 2, activeWithinDays: 90))])
        let split = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"], clones: try ClonePolicy(action: .split))])
        let flagged = try VendorRules(rules: [VendorRule(name: "acme", prefixes: ["com.acme"], clones: try ClonePolicy(action: .flag))])
        #expect(split.fingerprint != plain.fingerprint && flagged.fingerprint == plain.fingerprint)
        #expect(plain.fingerprint == defaulted.fingerprint)
        #expect(Set([plain.fingerprint, two.fingerprint, replace.fingerprint, windowed.fingerprint]).count == 4)
        #expect(plain != two)
    }

    @Test func everyKeyIsApplied() throws {
        try withConfig(
            """
            {"host": "127.0.0.2", "port": 9000, "dataDir": "/tmp/x", "nodeId": "n-2", "clusterId": "prod",
             "maxFrameBytes": 4096, "maxBatchSize": 10, "maxInFlight": 7, "drainTimeoutSeconds": 2.5, "logLevel": "debug",
             "eventLoopThreads": 3, "expectedDevices": 5000000, "commitDelayMicros": 350, "snapshotEveryOperations": 5000, "snapshotEverySeconds": 12, "vendorDefaultDepth": 3, "vendors": [{"name": "acme", "prefixes": ["com.acme", "net.acmecdn"]}]}
            """
        ) { path in
            var configuration = NodeConfiguration()
            try configuration.apply(configFile: path)
            #expect(configuration.host == "127.0.0.2" && configuration.port == 9000 && configuration.dataDirectory == "/tmp/x")
            #expect(configuration.nodeID?.value == "n-2" && configuration.clusterID == "prod")
            #expect(configuration.limits.maxFrameBytes == 4096 && configuration.limits.maxBatchSize == 10)
            #expect(configuration.limits.maxInFlight == 7 && configuration.drainTimeoutSeconds == 2.5)
            #expect(configuration.vendorRules.defaultScope == .labels(3) && configuration.eventLoopThreads == 3)
            #expect(configuration.expectedDevices == 5_000_000)
            #expect(configuration.commitPacing == CommitPacing(delayMicros: 350, worthOperations: 400))
            #expect(configuration.snapshotEveryOperations == 5_000)
            #expect(configuration.snapshotEverySeconds == 12 && configuration.logLevel == "debug")
        }
    }

    /// Each setting's value comes from its flag, else its environment variable, else the config
    /// file, else the default: checked for every setting in the table, each level above the
    /// ones below it.
    @Test(.offThePool) func flagsBeatTheEnvironmentWhichBeatsTheFileWhichBeatsTheDefault() throws {
        // Two valid texts per setting, and the file's JSON for one of them. The lists are read.
        let lists = (1...2).map { FileManager.default.temporaryDirectory.path + "/config-test-\(getpid())-\($0).dat" }
        for path in lists { try Data("com\nuk\nco.uk\n".utf8).write(to: URL(fileURLWithPath: path)) }
        defer { for path in lists { try? FileManager.default.removeItem(atPath: path) } }
        let samples: [String: (String, String)] = [
            "host": ("127.0.0.3", "127.0.0.4"), "port": ("7001", "7002"), "data-dir": ("/a", "/b"), "node-id": ("n-1", "n-2"),
            "cluster-id": ("c1", "c2"), "log-level": ("debug", "error"), "max-frame-bytes": ("4096", "8192"),
            "max-batch-size": ("10", "20"), "max-in-flight": ("5", "6"), "drain-timeout-seconds": ("1.5", "2.5"),
            "event-loop-threads": ("3", "4"), "expected-devices": ("100", "200"), "release-tables-gradually": ("true", "false"), "commit-delay-us": ("10", "20"),
            "snapshot-every-operations": ("30", "40"), "snapshot-every-seconds": ("2", "3"), "snapshot-by": ("journal", "fork"), "erasure-within": ("0", "60"), "journal-file-bytes": ("70000", "80000"),
            "public-suffix-list": (lists[0], lists[1]),
            "peers": ("a:1", "b:2"), "cluster-secret": ("s1", "s2"), "max-clock-skew": ("1.5", "2.5"),
            "ack-replicas": ("1", "2"), "replica-timeout": ("0.5", "1.5"), "causal-timeout": ("0", "2.5"), "advertise": ("h1:1", "h2:2"),
            "max-connections": ("7", "8"), "max-watchers": ("5", "6"), "watch-history": ("2000", "3000"), "watch-progress": ("0.5", "1.5"),
            "token-secret": ("0123456789abcdef-1", "0123456789abcdef-2"), "insecure": ("true", "false"), "log-format": ("json", "text"),
            "metrics-port": ("9400", "9401"), "tls-cert": ("/c1.pem", "/c2.pem"), "tls-key": ("/k1.pem", "/k2.pem"), "tls-ca": ("/a1.pem", "/a2.pem"),
        ]
        #expect(Set(samples.keys) == Set(NodeSetting.all.map(\.flag)), "every setting has samples")
        func json(_ setting: NodeSetting, _ text: String) -> String {
            "\"\(setting.fileKey)\": " + (setting.fileType == .string ? "\"\(text)\"" : text)
        }
        func value(_ configuration: NodeConfiguration, _ flag: String) -> String {
            switch flag {
            case "host": return configuration.host
            case "port": return "\(configuration.port)"
            case "data-dir": return configuration.dataDirectory
            case "node-id": return configuration.nodeID?.value ?? "none"
            case "cluster-id": return configuration.clusterID
            case "log-level": return configuration.logLevel
            case "max-frame-bytes": return "\(configuration.limits.maxFrameBytes)"
            case "max-batch-size": return "\(configuration.limits.maxBatchSize)"
            case "max-in-flight": return "\(configuration.limits.maxInFlight)"
            case "drain-timeout-seconds": return "\(configuration.drainTimeoutSeconds)"
            case "event-loop-threads": return configuration.eventLoopThreads.map { "\($0)" } ?? "none"
            case "expected-devices": return "\(configuration.expectedDevices)"
            case "commit-delay-us": return "\(configuration.commitPacing.delayMicros)"
            case "snapshot-every-operations": return "\(configuration.snapshotEveryOperations)"
            case "snapshot-every-seconds": return "\(configuration.snapshotEverySeconds)"
            case "snapshot-by": return configuration.snapshotsByFork ? "fork" : "journal"
            case "erasure-within": return "\(configuration.erasureWithinSeconds)"
            case "journal-file-bytes": return "\(configuration.journalFileBytes)"
            case "public-suffix-list": return configuration.publicSuffixListPath
            case "peers": return configuration.peers.map(\.description).joined(separator: ",")
            case "cluster-secret": return configuration.clusterSecret ?? "none"
            case "max-clock-skew": return "\(Double(configuration.maxClockSkewMillis) / 1_000)"
            case "ack-replicas": return "\(configuration.ackReplicas)"
            case "advertise": return configuration.advertise ?? "none"
            case "replica-timeout": return "\(Double(configuration.replicaTimeoutMillis) / 1_000)"
            case "causal-timeout": return "\(Double(configuration.causalTimeoutMillis) / 1_000)"
            case "max-connections": return "\(configuration.maxConnections)"
            case "max-watchers": return "\(configuration.maxWatchers)"
            case "watch-history": return "\(configuration.watchHistory)"
            case "watch-progress": return "\(Double(configuration.watchProgressMillis) / 1_000)"
            case "token-secret": return configuration.tokenSecret ?? "none"
            case "insecure": return "\(configuration.insecure)"
            case "release-tables-gradually": return "\(configuration.releaseTablesGradually)"
            case "log-format": return configuration.logFormat.rawValue
            case "metrics-port": return configuration.metricsPort.map { "\($0)" } ?? "none"
            case "tls-cert": return configuration.tlsCertificate ?? "none"
            case "tls-key": return configuration.tlsKey ?? "none"
            case "tls-ca": return configuration.tlsCA ?? "none"
            default: return "unknown setting \(flag)"
            }
        }
        let defaults = NodeConfiguration()
        for setting in NodeSetting.all {
            let (low, high) = samples[setting.flag]!
            let environment = setting.environment!
            // Peers are refused without a cluster secret: give them one that this test does not vary.
            let base = setting.flag == "peers" ? ["REGISTRY_CLUSTER_SECRET": "secret"] : [:]
            try withConfig("{\(json(setting, low))}") { path in
                let file = try NodeConfiguration.resolve(flags: ["config": path], environment: base)
                #expect(value(file, setting.flag) == value(try NodeConfiguration.resolve(flags: [setting.flag: low], environment: base), setting.flag))
                #expect(value(file, setting.flag) != value(defaults, setting.flag), "\(setting.flag): the file beats the default")
                let overFile = try NodeConfiguration.resolve(flags: ["config": path], environment: base.merging([environment: high]) { $1 })
                #expect(value(overFile, setting.flag) != value(file, setting.flag), "\(setting.flag): the environment beats the file")
                let overEnvironment = try NodeConfiguration.resolve(
                    flags: ["config": path, setting.flag: low], environment: base.merging([environment: high]) { $1 })
                #expect(value(overEnvironment, setting.flag) == value(file, setting.flag), "\(setting.flag): the flag beats the environment")
            }
        }
        // The config file's path itself: the flag beats REGISTRY_CONFIG.
        try withConfig("{\"port\": 7101}") { flagPath in
            try withConfig("{\"port\": 7102}") { environmentPath in
                let configuration = try NodeConfiguration.resolve(flags: ["config": flagPath], environment: ["REGISTRY_CONFIG": environmentPath])
                #expect(configuration.port == 7101)
                #expect(try NodeConfiguration.resolve(flags: [:], environment: ["REGISTRY_CONFIG": environmentPath]).port == 7102)
            }
        }
    }

    /// A node that names peers must be given the cluster's secret: one it made up alone could
    /// prove nothing to them, and no key may derive from the public cluster ID.
    @Test func peersWithoutAClusterSecretAreRefused() throws {
        #expect(throws: ConfigurationError.clusterSecretRequired) {
            try NodeConfiguration.resolve(flags: ["peers": "127.0.0.1:7401"], environment: [:])
        }
        #expect(throws: ConfigurationError.clusterSecretRequired) {
            try NodeConfiguration.resolve(flags: [:], environment: ["REGISTRY_PEERS": "127.0.0.1:7401"])
        }
        let configuration = try NodeConfiguration.resolve(flags: ["peers": "127.0.0.1:7401", "cluster-secret": "s"], environment: [:])
        #expect(configuration.clusterSecret == "s")
        #expect("\(ConfigurationError.clusterSecretRequired)".contains("openssl rand"))
    }

    /// Listening on every interface names no address peers can reach: with peers, --advertise
    /// must say where.
    @Test func peersOnAWildcardHostNeedAnAdvertisedAddress() throws {
        let flags = ["peers": "10.0.0.2:7400", "cluster-secret": "s", "host": "0.0.0.0", "insecure": "true"]
        #expect(throws: ConfigurationError.advertiseRequired("0.0.0.0")) { try NodeConfiguration.resolve(flags: flags, environment: [:]) }
        let advertised = try NodeConfiguration.resolve(flags: flags.merging(["advertise": "10.0.0.1:7400"]) { $1 }, environment: [:])
        #expect(advertised.advertise == "10.0.0.1:7400")
        #expect(try NodeConfiguration.resolve(flags: ["host": "0.0.0.0", "insecure": "true"], environment: [:]).peers.isEmpty)
    }

    /// Peers and --advertise are read by the one address rule the client uses too (HostPort).
    @Test func aPeerThatIsNoAddressIsRefusedNamingIt() throws {
        let base = ["cluster-secret": "s", "insecure": "true"]
        #expect(throws: ConfigurationError.invalidValue(source: "--peers", reason: "peer \"::1:7400\" names no usable host (an IPv6 address needs brackets: [::1]:7400)")) {
            try NodeConfiguration.resolve(flags: base.merging(["peers": "10.0.0.2:7400, ::1:7400"]) { $1 }, environment: [:])
        }
        #expect(throws: ConfigurationError.invalidValue(source: "--advertise", reason: "peer \"10.0.0.1\" is not host:port (or [IPv6]:port)")) {
            try NodeConfiguration.resolve(flags: base.merging(["advertise": "10.0.0.1"]) { $1 }, environment: [:])
        }
        let peers = try NodeConfiguration.resolve(flags: base.merging(["peers": " [::1]:7401 ,10.0.0.2:7400,"]) { $1 }, environment: [:]).peers
        #expect(peers.map(\.description) == ["[::1]:7401", "10.0.0.2:7400"])
    }

    @Test func aBadValueNamesWhereItCameFrom() throws {
        #expect(throws: ConfigurationError.invalidValue(source: "--port", reason: "port \"http\" is not a whole number")) {
            try NodeConfiguration.resolve(flags: ["port": "http"], environment: [:])
        }
        #expect(throws: ConfigurationError.invalidValue(source: "REGISTRY_PORT", reason: "port 99999 is not 0...65535")) {
            try NodeConfiguration.resolve(flags: [:], environment: ["REGISTRY_PORT": "99999"])
        }
        #expect(throws: ConfigurationError.invalidValue(source: "--snapshot-by", reason: "snapshot-by \"copy\" is not fork or journal")) {
            try NodeConfiguration.resolve(flags: ["snapshot-by": "copy"], environment: [:])
        }
    }

    @Test func nearestNamesAreFoundForMisspellingsOnly() {
        let keys = NodeSetting.all.map(\.fileKey)
        #expect(NearestName.closest(to: "comitDelayMicros", among: keys) == "commitDelayMicros")
        #expect(NearestName.closest(to: "datadir", among: keys) == "dataDir")
        #expect(NearestName.closest(to: "snapshotEverySecond", among: keys) == "snapshotEverySeconds")
        #expect(NearestName.closest(to: "color", among: keys) == nil)
        #expect(NearestName.editDistance(Array("kitten"), Array("sitting")) == 3)
    }

    @Test(arguments: [
        ("{\"port\": ", "not valid JSON"),
        ("[1, 2]", "the top level should be an object"),
        ("{\"port\": \"7400\"}", "port should be a whole number"),
        ("{\"port\": 70000}", "port 70000 is not 0...65535"),
        ("{\"eventLoopThreads\": 0}", "eventLoopThreads: event-loop threads 0 is not 1...256"),
        ("{\"maxConnections\": 0}", "maxConnections: max connections 0 is not 1...1000000"),
        ("{\"maxConnections\": 1000001}", "max connections 1000001"),
        ("{\"expectedDevices\": -1}", "expectedDevices: expected devices -1 is not 0...1073741824"),
        ("{\"expectedDevices\": 1073741825}", "expected devices 1073741825"),
        ("{\"commitDelayMicros\": -5}", "commitDelayMicros: commit delay -5 is not 0...10000"),
        ("{\"commitDelayMicros\": 10001}", "commit delay 10001"),
        ("{\"commitDelayMicros\": \"soon\"}", "commitDelayMicros should be a whole number"),
        ("{\"snapshotEveryOperations\": -1}", "snapshotEveryOperations: snapshot interval -1 is not 0...10000000000"),
        ("{\"snapshotEveryOperations\": \"often\"}", "snapshotEveryOperations should be a whole number"),
        ("{\"snapshotEverySeconds\": 1000001}", "snapshotEverySeconds: snapshot period 1000001 is not 0...1000000"),
        ("{\"erasureWithin\": 31536001}", "erasureWithin: erasure deadline 31536001 is not 0...31536000"),
        ("{\"erasureWithin\": \"daily\"}", "erasureWithin should be a whole number"),
        ("{\"journalSpares\": 4}", "unknown key \"journalSpares\""),
        ("{\"nodeId\": \"Node A\"}", "node ID"),
        ("{\"drainTimeoutSeconds\": -1}", "drain timeout"),
        ("{\"logLevel\": \"loud\"}", "log level \"loud\" is not one of trace"),
        ("{\"vendors\": [{\"name\": \"x\", \"prefixes\": [\"com\"]}]}", "vendors[0]:"),
        ("{\"vendors\": [{\"name\": \"x\"}]}", "vendors[0].prefixes is missing"),
        ("{\"vendors\": [{\"prefix\": [\"com.x\"]}]}", "unknown key \"vendors[0].prefix\"; did you mean \"prefixes\"?"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": 2}]}", "vendors[0].binding should be an object"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"maxDevices\": 0}}]}", "vendors[0].binding: invalid binding policy: the most devices per account must be 1 to 1000, not 0"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"maxDevices\": 1001}}]}", "must be 1 to 1000, not 1001"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"maxDevices\": 1.5}}]}", "vendors[0].binding.maxDevices should be a whole number"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"activeWithinDays\": 0}}]}", "the activity window must be 1 to 3650 days, not 0"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"pastLimit\": \"evict\"}}]}", "pastLimit should be \"reject\" or \"replace\""),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"binding\": {\"maxDevice\": 2}}]}", "unknown key \"vendors[0].binding.maxDevice\"; did you mean \"maxDevices\"?"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"bindings\": {}}]}", "did you mean \"binding\"?"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"clones\": \"split\"}]}", "vendors[0].clones should be an object"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"clones\": {\"action\": \"merge\"}}]}", "vendors[0].clones.action should be \"flag\", \"split\" or \"off\""),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"clones\": {\"windowDays\": 0}}]}", "vendors[0].clones: invalid clone policy: the clone window must be 1 to 3650 days, not 0"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"clones\": {\"windowDays\": \"7\"}}]}", "vendors[0].clones.windowDays should be a whole number"),
        ("{\"vendors\": [{\"prefixes\": [\"com.x\"], \"clones\": {\"windowDay\": 7}}]}", "unknown key \"vendors[0].clones.windowDay\"; did you mean \"windowDays\"?"),
        ("{\"maxFrameBytes\": 1}", "maxFrameBytes: max frame bytes 1 is not 4096...67108864"),
        ("{\"maxInFlight\": 0}", "maxInFlight: max in flight 0"),
        ("{\"clusterId\": \"\"}", "the cluster ID must not be empty"),
        ("{\"comitDelayMicros\": 100}", "unknown key \"comitDelayMicros\"; did you mean \"commitDelayMicros\"?"),
        ("{\"PORT\": 1}", "unknown key \"PORT\"; did you mean \"port\"?"),
        ("{\"frobnicate\": true}", "unknown key \"frobnicate\"; docs/operations.md lists every key"),
        ("{\"insecure\": \"yes\"}", "insecure should be true or false"),
        ("{\"tokenSecret\": \"short\"}", "tokenSecret: the token secret must be at least 16 bytes"),
        ("{\"logFormat\": \"xml\"}", "logFormat: log format \"xml\" is not text or json"),
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

    /// The default vendor comes from the Public Suffix List unless the file sets a depth; a list
    /// that cannot be read, or holds a bad rule, stops the node with the path and what to do.
    @Test func thePublicSuffixListIsReadUnlessTheFileSetsADepthAndABadOneIsATypedError() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let bad = temp.path + "/bad.dat"
        try Data("com\nco..uk\n".utf8).write(to: URL(fileURLWithPath: bad))
        let cases: [(String, String)] = [
            (temp.path + "/missing.dat", "install Debian's publicsuffix package"), (bad, "line 2"), ("", "path is empty"),
        ]
        for (path, fragment) in cases {
            #expect {
                try NodeConfiguration.resolve(flags: ["public-suffix-list": path], environment: [:])
            } throws: { error in
                guard let error = error as? ConfigurationError, case .invalidValue(let source, _) = error else { return false }
                return source == "--public-suffix-list" && "\(error)".contains(fragment)
            }
        }
        // The error names where the path came from: the variable, or the file's key.
        #expect {
            try NodeConfiguration.resolve(flags: [:], environment: ["REGISTRY_PUBLIC_SUFFIX_LIST": bad])
        } throws: { error in
            guard let error = error as? ConfigurationError, case .invalidValue(let source, _) = error else { return false }
            return source == "REGISTRY_PUBLIC_SUFFIX_LIST"
        }
        try withConfig(#"{"publicSuffixList": "\#(bad)"}"#) { path in
            #expect {
                try NodeConfiguration.resolve(flags: ["config": path], environment: [:])
            } throws: { error in
                guard let error = error as? ConfigurationError, case .invalidValue(let source, _) = error else { return false }
                return source == "\(path): publicSuffixList"
            }
        }
        let listed = try NodeConfiguration.resolve(flags: [:], environment: [:])
        #expect(listed.vendorRules.vendor(of: try BundleID(parsing: "uk.co.bbc.iplayer")).name == "uk.co.bbc")
        try withConfig(#"{"vendorDefaultDepth": 2}"#) { path in
            // A depth from the file: the list is not read, not even a missing one.
            let configuration = try NodeConfiguration.resolve(flags: ["config": path, "public-suffix-list": temp.path + "/missing.dat"], environment: [:])
            #expect(configuration.vendorRules.defaultScope == .labels(2))
        }
    }
}
