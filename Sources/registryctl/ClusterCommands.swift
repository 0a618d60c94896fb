import ArgumentParser
import Foundation
import Platform
import RegistryClient
import RegistryWire

/// `registryctl cluster ...`: the cluster as a whole.
struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect the cluster the node belongs to, and remove dead members.", subcommands: [ClusterStatus.self, ClusterVerify.self, ClusterRemove.self])
}

struct ClusterStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every node: its epoch and version vector, its links to its peers, replication lag, log and snapshot.",
        discussion: """
            Starts from --endpoint and follows the peer addresses each node reports, so one reachable \
            node shows the whole cluster. A node that does not answer is listed as unreachable; the \
            exit status is then 69. The last line compares the nodes' content: nodes that hold the same \
            operations (equal version vectors) must hold the same state digest, and are reported as \
            DIVERGED (exit status 1) when they do not.
            """)

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let nodes = try await Self.discover(global)
        let view = ClusterStatusView(nodes: nodes)
        Output.print(view, format: global.format)
        if nodes.contains(where: { $0.unreachable != nil }) { throw ExitCode(ExitStatus.unreachable) }
        if case .diverged = view.agreement { throw ExitCode(ExitStatus.serverError) }
    }

    /// Every node reachable from --endpoint, following the peer addresses each reports.
    static func discover(_ global: GlobalOptions) async throws -> [ClusterStatusView.Node] {
        let start = global.endpoint ?? ProcessInfo.processInfo.environment["REGISTRY_ENDPOINT"] ?? "127.0.0.1:7400"
        var queue = start.split(separator: ",").map(String.init)
        var seen = Set<String>()
        var nodes = [ClusterStatusView.Node]()
        let seconds = (try? global.seconds()) ?? 5
        let token: String?
        let tls: ClientTLS?
        do {
            token = try global.token()
            tls = try global.tls()
        } catch {
            FileHandle.standardError.write(Data("registryctl: \(error)\n".utf8))
            throw ExitCode(ExitStatus.usage)
        }
        while let endpoint = queue.first {
            queue.removeFirst()
            guard seen.insert(endpoint).inserted else { continue }
            do throws(RegistryClientError) {
                let stats = try await Self.stats(of: endpoint, seconds: seconds, token: token, tls: tls)
                // Its own address, as its peers name it, needs no second visit.
                for link in stats.peers where link.state == "own-address" { seen.insert(link.address) }
                nodes.append(ClusterStatusView.Node(endpoint: endpoint, stats: stats))
                queue += stats.peers.filter { $0.state != "own-address" }.map(\.address)
            } catch {
                switch error {
                case .invalidEndpoint:
                    // A usage error, not a node that does not answer.
                    exitWith(error)
                case .server(let refusal) where refusal.code == .unauthenticated || refusal.code == .permissionDenied:
                    // This token is refused; every node of the cluster would refuse it alike.
                    exitWith(error)
                case .server, .unreachable, .connectionClosed, .unexpectedResponse, .tls, .cancelled:
                    nodes.append(ClusterStatusView.Node(endpoint: endpoint, unreachable: "\(error)"))
                }
            }
        }
        return nodes
    }

    /// The stats of the node at `endpoint`, within `seconds` for each step: connecting, the
    /// hello's answer, and the stats' answer. A node that accepts connections and never answers
    /// (stopped, say) throws once they pass, and is listed as unreachable instead of holding the
    /// tool for ever.
    static func stats(of endpoint: String, seconds: Double, token: String?, tls: ClientTLS?) async throws(RegistryClientError) -> StatsMessage {
        let millis = Int64(seconds * 1_000)
        let client = try await RegistryClient.connect(
            to: try Endpoint(parsing: endpoint), role: .admin, clientName: "registryctl", token: token, tls: tls,
            connectTimeout: .milliseconds(millis), handshakeTimeout: .milliseconds(millis))
        let watchdog = Task.detached {
            try await Task.sleep(for: .milliseconds(millis))
            client.abandon(reason: "no answer to stats within \(seconds.formatted()) s (--timeout)")
        }
        defer { watchdog.cancel() }
        let stats: StatsMessage
        do {
            stats = try await client.stats()
        } catch {
            await client.close()
            throw error
        }
        await client.close()
        return stats
    }
}

struct ClusterVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Wait until every node holds the same operations, then check that they hold the same content.",
        discussion: """
            Asks every node (found as `cluster status` finds them) for its version vector and state \
            digest, again and again, until the vectors are equal or --wait runs out. Equal vectors with \
            equal digests print "converged" (exit status 0); equal vectors with different digests print \
            DIVERGED (exit status 1): the nodes applied the same operations and hold different state. \
            Vectors that never meet (writes keep arriving, or a link is down) exit 75; an unreachable \
            node exits 69.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(help: "Seconds to wait for the nodes' version vectors to meet.") var wait: Double = 30

    func validate() throws {
        guard wait > 0, wait.isFinite else { throw ValidationError("--wait must be a positive number of seconds") }
    }

    func run() async throws {
        let deadline = SystemClock.monotonicNanos() + UInt64(wait * 1_000_000_000)
        while true {
            let nodes = try await ClusterStatus.discover(global)
            let view = ClusterStatusView(nodes: nodes)
            let unreachable = nodes.contains { $0.unreachable != nil }
            let settled = !unreachable && view.agreement != .catchingUp
            if settled || SystemClock.monotonicNanos() >= deadline {
                Output.print(VerifyView(view: view), format: global.format)
                if unreachable { throw ExitCode(ExitStatus.unreachable) }
                switch view.agreement {
                case .converged: return
                case .diverged: throw ExitCode(ExitStatus.serverError)
                case .catchingUp: throw ExitCode(ExitStatus.timedOut)
                }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// `cluster verify`'s answer: the agreement, and each node's vector and digest.
struct VerifyView: Printable {
    let agreement: String
    let nodes: [ClusterStatusView.Node]

    init(view: ClusterStatusView) {
        agreement = view.agreement.summary
        nodes = view.nodes
    }

    var rows: [(String, String)] {
        [("agreement", agreement)]
            + nodes.map { node in
                (node.unreachable == nil ? node.node : node.endpoint, node.unreachable.map { "UNREACHABLE: \($0)" } ?? "digest \(node.stateDigest), holds \(node.holds)")
            }
    }
}

struct ClusterRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a dead member for good.",
        discussion: """
            The removal is logged on the node at --endpoint and replicates to every member. Links to the \
            removed node close, its open sessions close within a second, trimming stops waiting for it, and a \
            node with its ID is refused from then on: a node that comes back after removal needs a new node ID \
            and an empty data directory. A removed node that still runs learns it when a peer refuses it, and \
            refuses writes from then on (NOT_A_MEMBER). The node at --endpoint refuses to remove a node it \
            still streams to (MEMBER_REACHABLE): stop that node first, or pass --force.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The node ID to remove.") var node: String
    @Flag(help: "Remove the node even while the node at --endpoint still streams to it.") var force = false

    func run() async throws {
        await global.withClient(
            { (client) async throws(RegistryClientError) in
                switch try await client.send(.removeMember(nodeID: node, force: force)) {
                case .memberRemoved(let removed): return removed
                case .error(let error): throw .server(error)
                case let other: throw .unexpectedResponse("\(other) to RemoveMemberRequest")
                }
            }, print: RemovedView.init)
    }
}

/// `cluster remove`'s answer.
struct RemovedView: Printable {
    let removed: String
    init(_ removed: String) { self.removed = removed }
    var rows: [(String, String)] { [("removed", removed)] }
}

/// Every node of the cluster, as `cluster status` prints it.
struct ClusterStatusView: Printable {
    struct Node: Encodable {
        let endpoint: String
        var node = ""
        var epoch: UInt64 = 0
        var versionVector: [LogPosition] = []
        var devices: UInt64 = 0
        var logOperations: UInt64 = 0
        var journalBytes: UInt64 = 0
        var snapshotAgeMs: UInt64 = 0
        var snapshotOperations: UInt64 = 0
        var peers: [PeerLinkReport] = []
        var members: [ClusterMemberReport] = []
        /// The state digest, in hexadecimal.
        var stateDigest = ""
        var unreachable: String?
        /// The stats it came from, for the agreement.
        let stats: StatsMessage?

        private enum CodingKeys: String, CodingKey {
            case endpoint, node, epoch, versionVector, devices, logOperations, journalBytes, snapshotAgeMs, snapshotOperations, peers
            case members, stateDigest, unreachable
        }

        var holds: String {
            versionVector.isEmpty ? "nothing yet" : versionVector.map { "\($0.origin)/\($0.epoch): \($0.sequence)" }.joined(separator: ", ")
        }

        init(endpoint: String, stats: StatsMessage) {
            self.endpoint = endpoint
            node = stats.nodeID
            epoch = stats.logEpoch
            versionVector = stats.versionVector
            devices = stats.deviceCount
            logOperations = stats.logOperations
            journalBytes = stats.journalBytes
            snapshotAgeMs = stats.snapshotAgeMillis
            snapshotOperations = stats.snapshotOperations
            peers = stats.peers
            members = stats.members
            stateDigest = ClusterAgreement.hex(stats.stateDigest)
            self.stats = stats
        }

        init(endpoint: String, unreachable: String) {
            self.endpoint = endpoint
            self.unreachable = unreachable
            stats = nil
        }
    }

    let nodes: [Node]
    /// Whether the reachable nodes hold the same content.
    var agreement: ClusterAgreement { ClusterAgreement(nodes.compactMap(\.stats)) }

    private enum CodingKeys: String, CodingKey { case nodes, agreement }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(nodes, forKey: .nodes)
        try container.encode(agreement.summary, forKey: .agreement)
    }

    var rows: [(String, String)] { [] }

    var trailer: [String] {
        var lines = [String]()
        for node in nodes {
            if let unreachable = node.unreachable {
                lines.append("\(node.endpoint)  UNREACHABLE: \(unreachable)")
                continue
            }
            lines.append("\(node.node) at \(node.endpoint), epoch \(node.epoch), \(node.devices) devices, digest \(node.stateDigest)")
            lines.append("  holds     " + node.holds)
            let snapshot = node.snapshotOperations == 0 ? "no snapshot yet" : "snapshot of \(node.snapshotOperations) operations \(Output.duration(node.snapshotAgeMs)) old"
            lines.append("  log       \(node.logOperations) operations, journal \(Output.bytes(node.journalBytes)), \(snapshot)")
            lines.append(
                "  members   " + node.members.map { "\($0.nodeID) (\($0.removed ? "removed" : $0.address))" }.joined(separator: ", "))
            for link in node.peers where link.state != "own-address" {
                var text = "  -> \(link.address)" + (link.nodeID.isEmpty ? "" : " (\(link.nodeID))") + "  \(link.state)"
                text += ", lag \(link.backlogOperations) operations / \(link.lagMillis) ms, \(link.inFlightBatches) batches in flight, \(link.sentOperations) sent"
                if link.reconnects > 0 { text += ", \(link.reconnects) reconnects" }
                if link.state != "streaming", !link.lastError.isEmpty { text += " (last: \(link.lastError))" }
                lines.append(text)
            }
            if node.peers.allSatisfy({ $0.state == "own-address" }) { lines.append("  no peers (a single node)") }
        }
        lines.append(agreement.summary)
        return lines
    }
}
