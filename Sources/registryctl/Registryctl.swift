import ArgumentParser
import RegistryVersion
import Foundation
import RegistryClient
import RegistryWire

/// The operator's tool for one registry node.
@main
struct Registryctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registryctl",
        abstract: "Inspect and exercise a device registry node.",
        discussion: """
            Output is a table on a terminal and JSON otherwise; -o forces either. JSON keys are \
            stable and sorted.

            A node started with --token-secret needs a token: registryctl sends the one in \
            $REGISTRY_TOKEN, or in the file --token-file (or $REGISTRY_TOKEN_FILE) names. Stats, \
            snapshots and cluster changes need the admin role.

            Exit status: 0 ok; 1 the server refused the request or failed; 3 not found; 4 gone \
            (forgotten); 5 a watch's cursor expired; 64 usage error; 69 the node is unreachable; \
            75 no answer within --timeout.
            """,
        version: "registryctl \(BuildVersion.description)",
        subcommands: [Status.self, Device.self, Register.self, Account.self, VendorCommand.self, Watch.self, Snapshot.self, Cluster.self, Token.self])
}

/// Options every subcommand takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: "Node to talk to, host:port. [env: REGISTRY_ENDPOINT] [default: 127.0.0.1:7400]")
    var endpoint: String?

    @Option(name: .shortAndLong, help: "Output format: table or json. [default: table on a terminal, json otherwise]")
    var output: OutputFormat?

    @Option(help: "Seconds to wait for the node, connecting and answering included. [env: REGISTRY_TIMEOUT] [default: 5]")
    var timeout: Double?

    @Option(name: .customLong("tls-ca"), help: "Connect with TLS, trusting the CA certificates in this PEM file. [env: REGISTRY_TLS_CA]")
    var tlsCA: String?

    @Flag(name: .customLong("tls"), help: "Connect with TLS, trusting the system's roots (implied by --tls-ca).")
    var useTLS = false

    /// TLS when --tls or --tls-ca (or `$REGISTRY_TLS_CA`) asks for it.
    func tls() throws(RegistryClientError) -> ClientTLS? {
        let ca = tlsCA ?? ProcessInfo.processInfo.environment["REGISTRY_TLS_CA"]
        guard useTLS || ca != nil else { return nil }
        return try ClientTLS(caFile: ca)
    }

    @Option(name: .customLong("token-file"), help: "File holding the token to present. [env: REGISTRY_TOKEN_FILE] [default: $REGISTRY_TOKEN, else none]")
    var tokenFile: String?

    /// The token from --token-file, else `$REGISTRY_TOKEN_FILE`'s file, else `$REGISTRY_TOKEN`.
    func token() throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        guard let path = tokenFile ?? environment["REGISTRY_TOKEN_FILE"] else { return environment["REGISTRY_TOKEN"] }
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read the token file \(path)") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func validate() throws {
        guard (try? seconds()) != nil else {
            throw ValidationError("the timeout must be a number of seconds above 0 (--timeout or REGISTRY_TIMEOUT)")
        }
    }

    /// The timeout from --timeout, else `$REGISTRY_TIMEOUT`, else 5 s.
    func seconds() throws -> Double {
        let value: Double?
        if let timeout {
            value = timeout
        } else if let text = ProcessInfo.processInfo.environment["REGISTRY_TIMEOUT"] {
            value = Double(text)
        } else {
            value = 5
        }
        guard let value, value > 0, value.isFinite else { throw ValidationError("bad timeout") }
        return value
    }

    var format: OutputFormat {
        output ?? (isatty(STDOUT_FILENO) == 1 ? .table : .json)
    }

    /// Connects as an admin, runs `body`, closes, and prints its result; on any failure it
    /// exits with the documented status and the reason on stderr.
    func withClient<Value>(
        ackReplicas: UInt32? = nil, _ body: (RegistryClient) async throws(RegistryClientError) -> Value, print view: (Value) -> some Printable
    ) async {
        let text = endpoint ?? ProcessInfo.processInfo.environment["REGISTRY_ENDPOINT"] ?? "127.0.0.1:7400"
        // A node that accepts but never answers must not hang the tool: past the timeout it
        // exits on its own, whatever the call is waiting for. Half a second later than the
        // connect's own timeout, so that a node nothing answers for is reported unreachable (69).
        let seconds = (try? seconds()) ?? 5
        let watchdog = Task.detached {
            try await Task.sleep(for: .seconds(seconds + 0.5))
            FileHandle.standardError.write(Data("registryctl: no answer from \(text) within \(seconds.formatted()) s (--timeout)\n".utf8))
            Foundation.exit(ExitStatus.timedOut)
        }
        defer { watchdog.cancel() }
        let token: String?
        do {
            token = try self.token()
        } catch {
            FileHandle.standardError.write(Data("registryctl: \(error)\n".utf8))
            Foundation.exit(ExitStatus.usage)
        }
        do throws(RegistryClientError) {
            let client = try await RegistryClient.connect(
                to: try Endpoint(parsing: text), role: .admin, clientName: "registryctl", token: token, tls: try tls(),
                connectTimeout: .milliseconds(Int64(seconds * 1_000)), ackReplicas: ackReplicas)
            let value: Value
            do {
                value = try await body(client)
            } catch {
                await client.close()
                throw error
            }
            await client.close()
            Output.print(view(value), format: format)
        } catch {
            exitWith(error)
        }
    }
}

enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case table, json
}

/// Documented exit statuses.
enum ExitStatus {
    static let serverError: Int32 = 1
    static let notFound: Int32 = 3
    static let gone: Int32 = 4
    /// `watch`: the cursor is older than the node's feed.
    static let cursorExpired: Int32 = 5
    static let usage: Int32 = 64
    static let unreachable: Int32 = 69
    static let timedOut: Int32 = 75
}

/// Prints `error` to stderr and exits with its documented status.
func exitWith(_ error: RegistryClientError) -> Never {
    let status: Int32
    switch error {
    case .invalidEndpoint: status = ExitStatus.usage
    case .unreachable, .connectionClosed, .tls: status = ExitStatus.unreachable
    case .server(let wire) where wire.code == .notFound: status = ExitStatus.notFound
    case .server(let wire) where wire.code == .gone: status = ExitStatus.gone
    case .server, .unexpectedResponse: status = ExitStatus.serverError
    case .cancelled: status = ExitStatus.timedOut
    }
    FileHandle.standardError.write(Data("registryctl: \(error)\n".utf8))
    exit(status)
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the node's health and statistics.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        await global.withClient({ (client) async throws(RegistryClientError) in try await client.stats() }, print: StatusView.init)
    }
}

struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read device records, list suspected keychain clones, and forget devices.",
        subcommands: [Get.self, Find.self, Clones.self, Forget.self])

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a device by ID (aliases resolve to the canonical record).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "Device ID, UUID text.") var id: String

        func run() async throws {
            await global.withClient(
                { (client) async throws(RegistryClientError) in try await client.resolve(deviceID: id) }, print: DeviceView.init)
        }
    }

    struct Find: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find the device an identifier is claimed by.",
            discussion: "Give the scope with --bundle (its vendor is used) or --vendor, and one of --idfv or --keychain.")

        @OptionGroup var global: GlobalOptions
        @Option(help: "A bundle ID of the vendor, e.g. com.vendor.app1.") var bundle: String?
        @Option(help: "A vendor scope, e.g. com.vendor or a configured vendor name.") var vendor: String?
        @Option(help: "The IDFV to look up.") var idfv: String?
        @Option(help: "The keychain UUID to look up.") var keychain: String?

        func validate() throws {
            guard (bundle == nil) != (vendor == nil) else { throw ValidationError("give exactly one of --bundle or --vendor") }
            guard (idfv == nil) != (keychain == nil) else { throw ValidationError("give exactly one of --idfv or --keychain") }
        }

        func run() async throws {
            let scope: LookupRequest.Scope = bundle.map { .bundle($0) } ?? .vendor(vendor ?? "")
            let identifier = RegisterRequest(bundleID: "", keychain: keychain, idfv: idfv).identifiers[0]
            await global.withClient(
                { (client) async throws(RegistryClientError) in
                    try await client.lookup(LookupRequest(scope: scope, identifier: identifier))
                }, print: DeviceView.init)
        }
    }
}

extension Device {
    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget a device: erase it on every node.",
            discussion: """
                The device and every ID merged with it answer GONE (exit 4) from then on, on every node \
                once the forget has replicated. Its identifiers are released: an app that registers them \
                again gets a new device ID. Its account bindings are removed. Forgetting a device gone \
                already changes nothing and prints already-gone. docs/security.md says when its bytes \
                leave the disk.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "Device ID, UUID text (the canonical ID or any alias).") var id: String
        @Option(name: .customLong("ack-replicas"), help: "Peers that must hold the forget before the answer. [default: the node's]")
        var ackReplicas: UInt32?

        func run() async throws {
            await global.withClient(ackReplicas: ackReplicas,
                { (client) async throws(RegistryClientError) in try await client.forget(deviceID: id) }, print: ForgetView.init)
        }
    }
}

extension Device {
    struct Clones: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List suspected keychain clones, with their evidence.",
            discussion: """
                A clone is suspected when a device's keychain UUID took a later IDFV, and the earlier IDFV \
                registered again within the vendor's window: a backup restored onto a second phone that is \
                in use beside the first. Each line names the device, the vendor's action (flag: marked \
                only; split: the later IDFV got the new device shown), when the later IDFV appeared, and \
                when and from which app the earlier one was seen after it. docs/identity.md explains the \
                signal and its false positives.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(help: "A vendor name or a bundle ID of the vendor. [default: every vendor the token reaches]") var vendor: String?

        func run() async throws {
            await global.withClient(
                { (client) async throws(RegistryClientError) in try await client.clones(vendor: vendor) }, print: ClonesView.init)
        }
    }
}

/// Suspected clones as registryctl prints them.
struct ClonesView: Printable {
    struct Clone: Encodable {
        let device: String
        let vendor: String
        let action: String
        let newDevice: String?
        let laterIdfvAppeared: String
        let earlierIdfvSeen: String
        let bundle: String
        let decidedBy: String
    }

    let clones: [Clone]

    init(_ messages: [SuspectedCloneMessage]) {
        clones = messages.map {
            Clone(
                device: $0.deviceID, vendor: $0.vendor, action: $0.action.rawValue, newDevice: $0.newDeviceID.isEmpty ? nil : $0.newDeviceID,
                laterIdfvAppeared: Output.time($0.laterIDFVAppearedMillis), earlierIdfvSeen: Output.time($0.earlierIDFVSeenMillis),
                bundle: $0.bundleID, decidedBy: $0.decidedBy)
        }
    }

    var rows: [(String, String)] { [("suspected clones", "\(clones.count)")] }

    var trailer: [String] {
        clones.map { clone in
            let split = clone.newDevice.map { " -> new device \($0)" } ?? ""
            return "\(clone.device)  \(clone.vendor)  \(clone.action)\(split)  later IDFV \(clone.laterIdfvAppeared), earlier IDFV again \(clone.earlierIdfvSeen) from \(clone.bundle)"
        }
    }
}

/// A forget's answer as registryctl prints it.
struct ForgetView: Printable {
    let deviceId: String
    let vendor: String
    let aliases: [String]
    let outcome: String

    init(_ result: ForgetResultMessage) {
        deviceId = result.deviceID
        vendor = result.vendor
        aliases = result.aliasIDs
        outcome = result.alreadyGone ? "already-gone" : "forgotten"
    }

    var rows: [(String, String)] {
        [("outcome", outcome), ("device", deviceId), ("vendor", vendor), ("aliases", aliases.isEmpty ? "none" : aliases.joined(separator: ", "))]
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register a device as an app would (for manual tests).",
        discussion: "Give at least one of --idfv or --keychain.")

    @OptionGroup var global: GlobalOptions
    @Option(help: "The registering app's bundle ID.") var bundle: String
    @Option(help: "The app's identifierForVendor.") var idfv: String?
    @Option(help: "The UUID the app keeps in the vendor's shared keychain.") var keychain: String?
    @Option(name: .customLong("ack-replicas"), help: "Peers that must hold the registration before the answer. [default: the node's]")
    var ackReplicas: UInt32?

    func validate() throws {
        guard idfv != nil || keychain != nil else { throw ValidationError("give --idfv, --keychain, or both") }
    }

    func run() async throws {
        await global.withClient(ackReplicas: ackReplicas,
            { (client) async throws(RegistryClientError) in
                try await client.register(RegisterRequest(bundleID: bundle, keychain: keychain, idfv: idfv))
            }, print: RegisterView.init)
    }
}

struct Snapshot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask the node to take a snapshot of its state now.",
        discussion: """
            The node writes it in the background and answers once it is durable; then it deletes the \
            journal files every kept snapshot covers. A large node takes seconds: give --timeout room.
            """)

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        await global.withClient({ (client) async throws(RegistryClientError) in try await client.snapshot() }, print: SnapshotView.init)
    }
}
