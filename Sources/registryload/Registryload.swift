import ArgumentParser
import RegistryVersion
import Foundation
import RegistryClient
import LoadGeneration

/// `registryload`: drives registrations at one or more registry nodes and reports throughput
/// and latency the way a capacity planner needs them.
@main
struct Registryload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryload",
        abstract: "Load-test registry nodes with realistic registrations and report throughput and latency.",
        discussion: """
            Closed loop (the default) keeps --in-flight requests outstanding on every connection and \
            measures the maximum throughput. Open loop (--rate) sends at a fixed rate whatever the \
            answers do, and measures latency from each request's intended send time, so a stalled \
            server is charged for every request it delayed; service time (from the actual send) is \
            reported beside it.

            Workloads: first-install, returning, sibling, reinstall, lost-keychain, \
            concurrent-siblings, and bind and move, which bind accounts: bind binds a new account \
            to a known device, move unbinds an account from its device and binds it to another of \
            its vendor. Mix them with weights: --workload first-install=70,returning=20,sibling=10. \
            Known-device workloads act on devices this run has had acknowledged (a first install \
            until there is one; a move binds a new account until one is bound). The same --seed \
            and --threads give the same sequence of registrations on each thread.

            A run is INVALID when the generator could not keep up: an open-loop run that achieved \
            less than 90% of its intended rate, or whose scheduler lag p99 exceeded both 1ms and a \
            quarter of the latency p99.

            Exit status: 0 success; 1 an --slo objective was missed; 2 the run is invalid (or --verify \
            had lookups that got no answer); 3 --verify found lost or mismatched registrations or accounts; 64 bad usage; 69 an endpoint is \
            unreachable or refused the connection's limits; 74 the --json file cannot be written.
            """,
        version: "registryload \(BuildVersion.description)")

    @Option(
        name: .long, parsing: .upToNextOption,
        help: ArgumentHelp(
            "Nodes to load, host:port, comma- or space-separated; requests are spread across them. [env: REGISTRY_ENDPOINT]",
            valueName: "host:port"))
    var endpoints: [String] = [ProcessInfo.processInfo.environment["REGISTRY_ENDPOINT"] ?? "127.0.0.1:7400"]

    @Option(help: "TCP connections in total, spread across the endpoints.")
    var connections = 4

    @Option(name: .customLong("in-flight"), help: "Requests outstanding per connection (pipelining depth).")
    var inFlight = 32

    @Option(help: "Registrations per frame; 1 sends RegisterRequest, more send RegisterBatchRequest.")
    var batch = 1

    @Option(
        help: """
            Single registrations written to a connection together that the client library may \
            send as one batch frame, each keeping its own answer (RegistryClient's maxCoalesced). \
            1, the default here, sends each in a frame of its own.
            """)
    var coalesce = 1

    @Option(help: "Open loop at this many registrations per second. Without it the run is closed loop.")
    var rate: Double?

    @Option(help: "How long to measure after the warm-up, e.g. 30s or 2m. Default 10s unless --requests is given.")
    var duration: String?

    @Option(
        help:
            "Stop after this many registrations, binds and unbinds (each item of a batch counts) have been sent after the warm-up; a concurrent-siblings pair or a move counts two, so each of the --threads may go one past.")
    var requests: UInt64?

    @Option(help: "Load sent before measuring starts, excluded from the statistics.")
    var warmup = "1s"

    @Option(
        help: """
            Seed of the workload's random choices and identifiers; the report names it. Default: \
            a random seed, so that two runs against one node never present each other's \
            identifiers (which would turn first installs into returning devices and merges).
            """)
    var seed: UInt64?

    @Option(help: "A workload kind, or a weighted mix such as first-install=80,returning=20.")
    var workload = "first-install"

    @Option(help: "Vendors the workload spreads devices over (bundles <vendor-prefix><N>.app<M>).")
    var vendors = 100

    @Option(
        name: .customLong("vendor-prefix"),
        help: ArgumentHelp(
            "How vendor names start (two labels): vendors are <prefix><N>, their apps <prefix><N>.app<M>.",
            discussion: """
                With the default and up to 100 vendors, bundle IDs are at most 15 bytes, short enough \
                for the node to keep them inside its string values. Most real bundle IDs are longer, and \
                cost a node about 8% more CPU a registration (docs/load-testing.md); BENCHMARKS.md's \
                throughput figures use the default. For capacity figures, use a longer prefix such as \
                com.example-vendor.
                """))
    var vendorPrefix = LoadCatalogue.defaultVendorPrefix

    @Option(name: .customLong("apps-per-vendor"), help: "Apps per vendor, for sibling registrations.")
    var appsPerVendor = 3

    @Option(help: "Generator threads (event loops); each drives its share of the connections.")
    var threads = 1

    @Flag(help: "After the run, check that every acknowledged registration resolves to its ID on every endpoint.")
    var verify = false

    @Option(
        name: .customLong("ack-replicas"),
        help: "Peers that must hold each registration before the node answers it (the write concern); default: the nodes' --ack-replicas.")
    var ackReplicas: UInt32?

    @Flag(
        inversion: .prefixedNo,
        help: """
            Keep each device's causal token and send it with the device's later registrations, as an app keeping it beside \
            its keychain UUID would: a node answers only once it holds what the device's last answer reflected.
            """)
    var causalTokens = true

    @Option(name: .customLong("verify-wait"), help: "How long --verify keeps re-checking failures while a cluster converges.")
    var verifyWait = "10s"

    @Option(
        name: .customLong("answer-timeout"),
        help: """
            How long a connection may have requests outstanding and no answer before the run gives it up as lost: its \
            unanswered requests count as CONNECTION_CLOSED and the run is invalid. It also bounds the wait for a node's \
            answer to the hello. 0s waits for ever.
            """)
    var answerTimeout = "30s"

    @Option(
        name: .customLong("slo"),
        help: ArgumentHelp("A latency objective such as p99=2ms, p99.9=10ms or max=50ms; repeatable.", valueName: "objective"))
    var objectives: [String] = []

    @Option(name: .customLong("json"), help: ArgumentHelp("Write the versioned JSON report to this file.", valueName: "file"))
    var jsonPath: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp("File holding the token to present. [default: $REGISTRY_TOKEN]", valueName: "file"))
    var tokenFile: String?

    @Option(name: .customLong("tls-ca"), help: ArgumentHelp("Connect with TLS, trusting the CA certificates in this PEM file.", valueName: "file"))
    var tlsCA: String?

    @Option(
        help: """
            Watch streams to run during the load (spread across the endpoints, every vendor each); the report gives \
            the change feed's lag, from each event's operation clock to its delivery.
            """)
    var watchers = 0

    func validate() throws {
        _ = try makePlan()
    }

    /// The token from --token-file, else `$REGISTRY_TOKEN`.
    private func token() throws -> String? {
        guard let tokenFile else { return ProcessInfo.processInfo.environment["REGISTRY_TOKEN"] }
        guard let data = FileManager.default.contents(atPath: tokenFile) else { throw ValidationError("cannot read the token file \(tokenFile)") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func makePlan() throws -> LoadPlan {
        do {
            let endpointList = try endpoints.flatMap { $0.split(separator: ",") }.map { text throws(RegistryClientError) in
                try Endpoint(parsing: String(text))
            }
            guard !endpointList.isEmpty else { throw ValidationError("--endpoints needs at least one host:port") }
            guard threads >= 1 else { throw ValidationError("--threads must be at least 1") }
            guard connections >= threads * endpointList.count else {
                throw ValidationError(
                    "--connections must be at least --threads × endpoints (\(threads * endpointList.count)), so every thread reaches every endpoint")
            }
            guard inFlight >= 1 else { throw ValidationError("--in-flight must be at least 1") }
            guard (0...10_000).contains(watchers) else { throw ValidationError("--watchers must be 0...10000") }
            guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
            guard coalesce >= 1 else { throw ValidationError("--coalesce must be at least 1") }
            guard vendors >= 1, appsPerVendor >= 1 else { throw ValidationError("--vendors and --apps-per-vendor must be at least 1") }
            try LoadCatalogue.check(vendorPrefix: vendorPrefix, vendors: vendors, appsPerVendor: appsPerVendor)
            if let rate { guard rate > 0, rate.isFinite else { throw ValidationError("--rate must be a positive number") } }
            if let requests { guard requests > 0 else { throw ValidationError("--requests must be positive") } }
            let measured = try duration.map { text throws(LoadConfigurationError) in try DurationText(parsing: text) }
            if let measured, measured.nanoseconds == 0 { throw ValidationError("--duration must be positive") }
            return LoadPlan(
                endpoints: endpointList, connections: connections, inFlight: inFlight, batch: batch, coalesce: coalesce, rate: rate,
                duration: measured ?? (requests == nil ? DurationText(nanoseconds: 10_000_000_000) : nil), requests: requests,
                warmup: try DurationText(parsing: warmup), seed: seed ?? UInt64.random(in: 1 ... UInt64.max), mix: try WorkloadMix(parsing: workload),
                catalogue: LoadCatalogue(vendors: vendors, appsPerVendor: appsPerVendor, vendorPrefix: vendorPrefix), threads: threads, verify: verify,
                verifyWait: try DurationText(parsing: verifyWait), answerTimeout: try DurationText(parsing: answerTimeout),
                objectives: try objectives.map { text throws(LoadConfigurationError) in try ServiceLevelObjective(parsing: text) },
                ackReplicas: ackReplicas, token: try token(), tlsCA: tlsCA, causalTokens: causalTokens, watchers: watchers)
        } catch let error as LoadConfigurationError {
            throw ValidationError(error.description)
        } catch let error as RegistryClientError {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let plan = try makePlan()
        let report: LoadReport
        do throws(RegistryClientError) {
            report = try await LoadRun(plan: plan).run()
        } catch {
            FileHandle.standardError.write(Data("registryload: \(error)\n".utf8))
            throw ExitCode(69)
        }
        print(ReportText.summary(report), terminator: "")
        if let jsonPath {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            do {
                try encoder.encode(report).write(to: URL(fileURLWithPath: jsonPath))
            } catch {
                FileHandle.standardError.write(Data("registryload: cannot write \(jsonPath): \(error)\n".utf8))
                throw ExitCode(74)
            }
        }
        if let verification = report.verification, !verification.foundNoLoss { throw ExitCode(3) }
        if !report.judgement.valid { throw ExitCode(2) }
        if !report.judgement.objectivesMet { throw ExitCode(1) }
    }
}
