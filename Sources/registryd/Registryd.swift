import ArgumentParser
import RegistryVersion
import Foundation
import Logging
import Metrics
import NIOPosix
import Platform
import Prometheus
import RegistryServer
import ServiceLifecycle

/// The registry node daemon.
@main
struct Registryd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryd",
        abstract: "Run a device registry node.",
        discussion: """
            Each setting comes from, strongest first: a flag, its environment variable, the JSON \
            config file (--config or REGISTRY_CONFIG), then the default. See deploy/registryd.json \
            for every config-file key.

            The node logs "listening on HOST:PORT" once it accepts connections (--port 0 picks a \
            free port). SIGTERM or SIGINT stops it gracefully: it stops accepting, answers what is \
            in flight (up to drainTimeoutSeconds), then closes storage.

            Exit status: 0 after a graceful stop; 64 bad flags; 74 storage error (missing, \
            unwritable or locked data directory, a damaged journal or snapshot, a data directory \
            of an earlier version, a failed write); 78 bad configuration.
            """,
        version: "registryd \(BuildVersion.description)")

    @Option(help: "JSON config file. [env: REGISTRY_CONFIG]")
    var config: String?

    /// For `make settings-docs`: prints the Markdown table of the settings named (comma-separated;
    /// `all` for every one) and exits.
    @Option(name: .customLong("settings-markdown"), help: .hidden)
    var settingsMarkdown: String?

    @Option(name: .customLong("host"), help: Self.help("host"))
    var host: String?

    @Option(name: .customLong("port"), help: Self.help("port"))
    var port: String?

    @Option(name: .customLong("data-dir"), help: Self.help("data-dir"))
    var dataDir: String?

    @Option(name: .customLong("node-id"), help: Self.help("node-id"))
    var nodeID: String?

    @Option(name: .customLong("cluster-id"), help: Self.help("cluster-id"))
    var clusterID: String?

    @Option(name: .customLong("log-level"), help: Self.help("log-level"))
    var logLevel: String?

    @Option(name: .customLong("max-frame-bytes"), help: Self.help("max-frame-bytes"))
    var maxFrameBytes: String?

    @Option(name: .customLong("max-batch-size"), help: Self.help("max-batch-size"))
    var maxBatchSize: String?

    @Option(name: .customLong("max-in-flight"), help: Self.help("max-in-flight"))
    var maxInFlight: String?

    @Option(name: .customLong("drain-timeout-seconds"), help: Self.help("drain-timeout-seconds"))
    var drainTimeoutSeconds: String?

    @Option(name: .customLong("event-loop-threads"), help: Self.help("event-loop-threads"))
    var eventLoopThreads: String?

    @Option(name: .customLong("expected-devices"), help: Self.help("expected-devices"))
    var expectedDevices: String?

    @Flag(name: .customLong("release-tables-gradually"), help: ArgumentHelp(NodeSetting.named("release-tables-gradually").helpLine))
    var releaseTablesGradually = false

    @Option(name: .customLong("commit-delay-us"), help: Self.help("commit-delay-us"))
    var commitDelayMicros: String?

    @Option(name: .customLong("snapshot-every-operations"), help: Self.help("snapshot-every-operations"))
    var snapshotEveryOperations: String?

    @Option(name: .customLong("snapshot-every-seconds"), help: Self.help("snapshot-every-seconds"))
    var snapshotEverySeconds: String?

    @Option(name: .customLong("snapshot-by"), help: Self.help("snapshot-by"))
    var snapshotBy: String?

    @Option(name: .customLong("erasure-within"), help: Self.help("erasure-within"))
    var erasureWithin: String?

    @Option(name: .customLong("journal-file-bytes"), help: Self.help("journal-file-bytes"))
    var journalFileBytes: String?

    @Option(name: .customLong("public-suffix-list"), help: Self.help("public-suffix-list"))
    var publicSuffixList: String?

    @Option(name: .customLong("peers"), help: Self.help("peers"))
    var peers: String?

    @Option(name: .customLong("cluster-secret"), help: Self.help("cluster-secret"))
    var clusterSecret: String?

    @Option(name: .customLong("max-clock-skew"), help: Self.help("max-clock-skew"))
    var maxClockSkew: String?

    @Option(name: .customLong("ack-replicas"), help: Self.help("ack-replicas"))
    var ackReplicas: String?

    @Option(name: .customLong("replica-timeout"), help: Self.help("replica-timeout"))
    var replicaTimeout: String?

    @Option(name: .customLong("causal-timeout"), help: Self.help("causal-timeout"))
    var causalTimeout: String?

    @Option(name: .customLong("max-connections"), help: Self.help("max-connections"))
    var maxConnections: String?

    @Option(name: .customLong("max-watchers"), help: Self.help("max-watchers"))
    var maxWatchers: String?

    @Option(name: .customLong("watch-history"), help: Self.help("watch-history"))
    var watchHistory: String?

    @Option(name: .customLong("watch-progress"), help: Self.help("watch-progress"))
    var watchProgress: String?

    @Option(name: .customLong("advertise"), help: Self.help("advertise"))
    var advertise: String?

    @Option(name: .customLong("token-secret"), help: Self.help("token-secret"))
    var tokenSecret: String?

    @Flag(name: .customLong("insecure"), help: ArgumentHelp(NodeSetting.named("insecure").helpLine))
    var insecure = false

    @Option(name: .customLong("log-format"), help: Self.help("log-format"))
    var logFormat: String?

    @Option(name: .customLong("metrics-port"), help: Self.help("metrics-port"))
    var metricsPort: String?

    @Option(name: .customLong("tls-cert"), help: Self.help("tls-cert"))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: Self.help("tls-key"))
    var tlsKey: String?

    @Option(name: .customLong("tls-ca"), help: Self.help("tls-ca"))
    var tlsCA: String?

    /// A setting's help, from its one description in `NodeSetting.all`.
    private static func help(_ flag: String) -> ArgumentHelp {
        let setting = NodeSetting.named(flag)
        return ArgumentHelp(setting.helpLine, discussion: setting.discussion, valueName: setting.fileType == .string ? "text" : "n")
    }

    /// The flags given, keyed by flag name without dashes, for `NodeConfiguration.resolve`.
    private var flags: [String: String] {
        let given: [String: String?] = [
            "config": config,
            "host": host,
            "port": port,
            "data-dir": dataDir,
            "node-id": nodeID,
            "cluster-id": clusterID,
            "log-level": logLevel,
            "max-frame-bytes": maxFrameBytes,
            "max-batch-size": maxBatchSize,
            "max-in-flight": maxInFlight,
            "drain-timeout-seconds": drainTimeoutSeconds,
            "event-loop-threads": eventLoopThreads,
            "expected-devices": expectedDevices,
            "release-tables-gradually": releaseTablesGradually ? "true" : nil,
            "commit-delay-us": commitDelayMicros,
            "snapshot-every-operations": snapshotEveryOperations,
            "snapshot-every-seconds": snapshotEverySeconds,
            "snapshot-by": snapshotBy,
            "erasure-within": erasureWithin,
            "journal-file-bytes": journalFileBytes,
            "public-suffix-list": publicSuffixList,
            "peers": peers,
            "cluster-secret": clusterSecret,
            "max-clock-skew": maxClockSkew,
            "ack-replicas": ackReplicas,
            "replica-timeout": replicaTimeout,
            "causal-timeout": causalTimeout,
            "max-connections": maxConnections,
            "max-watchers": maxWatchers,
            "watch-history": watchHistory,
            "watch-progress": watchProgress,
            "advertise": advertise,
            "token-secret": tokenSecret,
            "insecure": insecure ? "true" : nil,
            "log-format": logFormat,
            "metrics-port": metricsPort,
            "tls-cert": tlsCert,
            "tls-key": tlsKey,
            "tls-ca": tlsCA,
        ]
        // The options above and this dictionary list every setting again (ArgumentParser needs a
        // stored property per option); a setting missing here would be parsed and then ignored.
        precondition(
            Set(given.keys) == Set(NodeSetting.all.map(\.flag) + ["config"]),
            "registryd's flags and NodeSetting.all differ: \(Set(given.keys).symmetricDifference(NodeSetting.all.map(\.flag) + ["config"]))")
        return given.compactMapValues { $0 }
    }

    func run() async throws {
        if let names = settingsMarkdown {
            print(NodeSetting.markdownTable(flags: names == "all" ? nil : names.split(separator: ",").map(String.init)), terminator: "")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let configuration: NodeConfiguration
        do {
            configuration = try NodeConfiguration.resolve(flags: flags, environment: environment)
        } catch {
            Self.fail("\(error)", status: 78)
        }
        let tls: NodeTLS?
        do {
            tls = try NodeTLS.load(configuration)
        } catch {
            Self.fail("\(error)", status: 78)
        }
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        switch configuration.logFormat {
        case .text:
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        case .json:
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label, level: level) }
        }
        let logger = Logger(label: "registryd")
        if configuration.insecure && !NodeConfiguration.isLoopback(configuration.host) {
            logger.warning(
                "--insecure: listening beyond loopback in the clear",
                metadata: ["host": "\(configuration.host)", "tokens": "\(configuration.tokenSecret == nil ? "off" : "on")"])
        }

        // Connections past the limit of open files would fail to be accepted, unanswered; the
        // journal, snapshots and peers need descriptors of their own besides.
        if let files = OpenFileLimit.raiseToHard(), UInt64(configuration.maxConnections) + Self.descriptorsBesideConnections > files {
            logger.warning(
                "--max-connections does not fit under the limit of open files: connections past it are not accepted",
                metadata: [
                    "max_connections": "\(configuration.maxConnections)", "open_files_limit": "\(files)",
                    "hint": "raise the limit (ulimit -n, systemd LimitNOFILE) or lower --max-connections",
                ])
        }

        let loops = configuration.eventLoopThreads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
        // The metrics port answers before storage opens: /readyz says why it is not ready yet.
        var metrics: (endpoint: MetricsEndpoint, server: MetricsServer)?
        if let port = configuration.metricsPort {
            let registry = PrometheusCollectorRegistry()
            var factory = PrometheusMetricsFactory(registry: registry)
            factory.defaultDurationHistogramBuckets = [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000]
                .map { Duration.microseconds($0) }
            factory.defaultValueHistogramBuckets = [1, 10, 100, 1_000, 10_000, 100_000]
            MetricsSystem.bootstrap(factory)
            let endpoint = MetricsEndpoint(registry: registry)
            let server = MetricsServer(
                endpoint: endpoint, host: configuration.host, port: port, group: loops ?? MultiThreadedEventLoopGroup.singleton, logger: logger)
            do {
                try await server.start()
            } catch {
                Self.fail("cannot listen for metrics on \(configuration.host):\(port): \(error)", status: 74)
            }
            metrics = (endpoint, server)
        }

        let fatal = FatalSignal()
        let engine: RegistryEngine
        do {
            engine = try RegistryEngine(configuration: configuration, logger: logger, onFatalError: { _ in
                fatal.trigger()
            })
        } catch {
            Self.fail("\(error)", status: 74)
        }
        metrics?.endpoint.attach(engine)
        let server = RegistryServer(
            engine: engine, configuration: configuration, tls: tls, logger: logger, group: loops ?? MultiThreadedEventLoopGroup.singleton)
        let group = ServiceGroup(
            configuration: .init(
                services: [server as any Service] + (metrics.map { [$0.server as any Service] } ?? []), gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        fatal.onTrigger { Task { await group.triggerGracefulShutdown() } }
        do {
            try await group.run()
        } catch {
            Self.fail("\(error)", status: 74)
        }
        if fatal.triggered { Self.fail("stopped after a storage failure", status: 74) }
    }

    /// Open files a node needs besides its connections: the journal's, snapshots', the
    /// listeners' and its links to its peers, with room to spare.
    static let descriptorsBesideConnections: UInt64 = 256

    private static func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("registryd: error: \(message)\n".utf8))
        Foundation.exit(status)
    }
}
