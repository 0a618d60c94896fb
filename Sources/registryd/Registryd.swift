import ArgumentParser
import Foundation
import Logging
import NIOPosix
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
            unwritable or locked data directory, failed write); 78 bad configuration.
            """)

    @Option(help: "Address to listen on. [env: REGISTRY_HOST] [default: 127.0.0.1]")
    var host: String?

    @Option(help: "TCP port; 0 picks a free one. [env: REGISTRY_PORT] [default: 7400]")
    var port: Int?

    @Option(name: .customLong("data-dir"), help: "Existing directory for the durable log. [env: REGISTRY_DATA_DIR] [default: ./data]")
    var dataDir: String?

    @Option(
        name: .customLong("node-id"),
        help: "Node name (lower-case letters, digits, '-'). [env: REGISTRY_NODE_ID] [default: stored in the data directory, or generated]")
    var nodeID: String?

    @Option(name: .customLong("cluster-id"), help: "Cluster name reported to clients. [env: REGISTRY_CLUSTER_ID] [default: default]")
    var clusterID: String?

    @Option(help: "JSON config file. [env: REGISTRY_CONFIG]")
    var config: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical. [env: REGISTRY_LOG_LEVEL] [default: info]")
    var logLevel: String?

    @Option(name: .customLong("max-frame-bytes"), help: "Largest frame accepted, in bytes. [default: 1048576]")
    var maxFrameBytes: UInt32?

    @Option(name: .customLong("max-batch-size"), help: "Most registrations per batch frame. [default: 1000]")
    var maxBatchSize: UInt32?

    @Option(name: .customLong("max-in-flight"), help: "Unanswered requests per connection before reading pauses. [default: 1024]")
    var maxInFlight: UInt32?

    @Option(
        name: .customLong("event-loop-threads"),
        help: "Threads serving connections. [env: REGISTRY_EVENT_LOOP_THREADS] [default: one per CPU core]")
    var eventLoopThreads: Int?

    @Option(
        name: .customLong("expected-devices"),
        help: ArgumentHelp(
            "Devices to size the in-memory indexes for at start-up (0...1073741824). [env: REGISTRY_EXPECTED_DEVICES] [default: 0, start small and grow]",
            discussion: "Below this many devices the indexes never grow, so no request pays for a bigger table; they take 96 to 192 bytes of memory per expected device from the start."))
    var expectedDevices: Int?

    @Option(
        name: .customLong("commit-delay-us"),
        help: ArgumentHelp(
            "Microseconds a busy log writer waits for more operations before a small group commit (0...10000). [env: REGISTRY_COMMIT_DELAY_US] [default: 300]",
            discussion: "Only a commit that follows another directly and would carry fewer than 400 operations waits, so a quiet node commits at once. Under load, fewer and bigger commits save the CPU and the disk requests each journal write and fdatasync costs; 0 commits at once always."))
    var commitDelayMicros: Int?

    @Option(
        name: .customLong("move-journal-below"),
        help: ArgumentHelp(
            "Operations a second at or below which the node moves finished journal files into its SQLite log while serving (0...10000000). [env: REGISTRY_MOVE_JOURNAL_BELOW] [default: 20000]",
            discussion: "Commits go to journal files of 64 MiB. While the node committed at most this many operations a second over the last second, a background thread moves the finished ones into the SQLite log, about a megabyte per transaction, and retires them; a busier node keeps them until it quiets down or restarts. 0 never moves while serving: every file waits for the next start-up."))
    var moveJournalBelow: Int?

    @Option(
        name: .customLong("journal-spares"),
        help: ArgumentHelp(
            "Spare journal files of 64 MiB to keep for rotations (1...4096). [env: REGISTRY_JOURNAL_SPARES] [default: 1]",
            discussion: "A rotation writes over a spare, whose blocks are already on disk, rather than append to a new file. Spares come from retired journal files, and a quiet node makes the missing ones of zeros (only while it moves journal files, see --move-journal-below). When none is left, a busy node writes a spare of zeros for each file it fills, as much disk traffic as the journal itself: keep as many as the journal files a burst fills (about one a second at 460,000 registrations/s). Each takes 64 MiB of disk."))
    var journalSpares: Int?

    func validate() throws {
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let configuration: NodeConfiguration
        do {
            configuration = try resolveConfiguration(environment)
        } catch {
            Self.fail("\(error)", status: 78)
        }
        let level = (logLevel ?? environment["REGISTRY_LOG_LEVEL"]).flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "registryd")

        let fatal = FatalSignal()
        let engine: RegistryEngine
        do {
            engine = try RegistryEngine(configuration: configuration, logger: logger, onFatalError: { _ in
                fatal.trigger()
            })
        } catch {
            Self.fail("\(error)", status: 74)
        }
        let loops = configuration.eventLoopThreads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) }
        let server = RegistryServer(
            engine: engine, configuration: configuration, logger: logger, group: loops ?? MultiThreadedEventLoopGroup.singleton)
        let group = ServiceGroup(
            configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        fatal.onTrigger { Task { await group.triggerGracefulShutdown() } }
        do {
            try await group.run()
        } catch {
            Self.fail("\(error)", status: 74)
        }
        if fatal.triggered { Self.fail("stopped after a storage failure", status: 74) }
    }

    /// Defaults, then the config file, then environment variables, then flags.
    private func resolveConfiguration(_ environment: [String: String]) throws(ConfigurationError) -> NodeConfiguration {
        var configuration = NodeConfiguration()
        if let path = config ?? environment["REGISTRY_CONFIG"] {
            try configuration.apply(configFile: path)
        }
        if let value = host ?? environment["REGISTRY_HOST"] { configuration.host = value }
        if let (value, source) = try Self.wholeNumber(port, flag: "--port", "REGISTRY_PORT", in: environment, naming: "a port") {
            try configuration.setPort(value, source: source)
        }
        if let value = dataDir ?? environment["REGISTRY_DATA_DIR"] { configuration.dataDirectory = value }
        if let value = nodeID {
            try configuration.setNodeID(value, source: "--node-id")
        } else if let value = environment["REGISTRY_NODE_ID"] {
            try configuration.setNodeID(value, source: "REGISTRY_NODE_ID")
        }
        if let value = clusterID ?? environment["REGISTRY_CLUSTER_ID"] { configuration.clusterID = value }
        if let value = maxFrameBytes { configuration.limits.maxFrameBytes = value }
        if let value = maxBatchSize { configuration.limits.maxBatchSize = value }
        if let value = maxInFlight { configuration.limits.maxInFlight = value }
        if let (value, source) = try Self.wholeNumber(
            eventLoopThreads, flag: "--event-loop-threads", "REGISTRY_EVENT_LOOP_THREADS", in: environment)
        {
            try configuration.setEventLoopThreads(value, source: source)
        }
        if let (value, source) = try Self.wholeNumber(
            expectedDevices, flag: "--expected-devices", "REGISTRY_EXPECTED_DEVICES", in: environment)
        {
            try configuration.setExpectedDevices(value, source: source)
        }
        if let (value, source) = try Self.wholeNumber(
            commitDelayMicros, flag: "--commit-delay-us", "REGISTRY_COMMIT_DELAY_US", in: environment)
        {
            try configuration.setCommitDelayMicros(value, source: source)
        }
        if let (value, source) = try Self.wholeNumber(
            moveJournalBelow, flag: "--move-journal-below", "REGISTRY_MOVE_JOURNAL_BELOW", in: environment)
        {
            try configuration.setMoveJournalBelow(value, source: source)
        }
        if let (value, source) = try Self.wholeNumber(
            journalSpares, flag: "--journal-spares", "REGISTRY_JOURNAL_SPARES", in: environment)
        {
            try configuration.setJournalSpares(value, source: source)
        }
        try configuration.validate(source: "flags")
        return configuration
    }

    /// A whole-number setting from its flag's `value`, else from environment variable `name`, with
    /// the source to name in errors; nil when neither is set.
    private static func wholeNumber(
        _ value: Int?, flag: String, _ name: String, in environment: [String: String], naming what: String = "a whole number"
    ) throws(ConfigurationError) -> (value: Int, source: String)? {
        if let value { return (value, flag) }
        return try wholeNumber(name, in: environment, naming: what).map { ($0, name) }
    }

    /// The whole number environment variable `name` holds, nil when it is unset; any other text is
    /// refused as not being `what`.
    private static func wholeNumber(
        _ name: String, in environment: [String: String], naming what: String = "a whole number"
    ) throws(ConfigurationError) -> Int? {
        guard let text = environment[name] else { return nil }
        guard let value = Int(text) else { throw .invalidValue(source: name, reason: "\"\(text)\" is not \(what)") }
        return value
    }

    private static func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("registryd: error: \(message)\n".utf8))
        Foundation.exit(status)
    }
}
