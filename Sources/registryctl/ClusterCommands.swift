import ArgumentParser
import Foundation
import RegistryClient
import RegistryWire

/// `registryctl cluster ...`: the cluster as a whole.
struct Cluster: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect the cluster the node belongs to, and remove dead members.", subcommands: [ClusterStatus.self, ClusterRemove.self])
}

struct ClusterStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show every node: its epoch and version vector, its links to its peers, replication lag, log and snapshot.",
        discussion: """
            Starts from --endpoint and follows the peer addresses each node reports, so one reachable \
            node shows the whole cluster. A node that does not answer is listed as unreachable; the \
            exit status is then 69.
            """)

    @OptionGroup var global: GlobalOptions

    func run() async throws {
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
                nodes.append(ClusterStatusView.Node(endpoint: endpoint, unreachable: "\(error)"))
            }
        }
        let view = ClusterStatusView(nodes: nodes)
        Output.print(view, format: global.format)
        if nodes.contains(where: { $0.unreachable != nil }) { throw ExitCode(ExitStatus.unreachable) }
    }

    /// The stats of the node at `endpoint`, within `seconds`.
    static func stats(of endpoint: String, seconds: Double, token: String?, tls: ClientTLS?) async throws(RegistryClientError) -> StatsMessage {
        let client = try await RegistryClient.connect(
            to: try Endpoint(parsing: endpoint), role: .admin, clientName: "registryctl", token: token, tls: tls,
            connectTimeout: .milliseconds(Int64(seconds * 1_000)))
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

struct ClusterRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a dead member for good.",
        discussion: """
            The removal is logged on the node at --endpoint and replicates to every member. Links to the \
            removed node close, trimming stops waiting for it, and a node with its ID is refused from then on: \
            a node that comes back after removal needs a new node ID and an empty data directory.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The node ID to remove.") var node: String

    func run() async throws {
        await global.withClient(
            { (client) async throws(RegistryClientError) in
                switch try await client.send(.removeMember(nodeID: node)) {
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
        var unreachable: String?

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
        }

        init(endpoint: String, unreachable: String) {
            self.endpoint = endpoint
            self.unreachable = unreachable
        }
    }

    let nodes: [Node]

    var rows: [(String, String)] { [] }

    var trailer: [String] {
        var lines = [String]()
        for node in nodes {
            if let unreachable = node.unreachable {
                lines.append("\(node.endpoint)  UNREACHABLE: \(unreachable)")
                continue
            }
            lines.append("\(node.node) at \(node.endpoint), epoch \(node.epoch), \(node.devices) devices")
            lines.append(
                "  holds     " + (node.versionVector.isEmpty ? "nothing yet" : node.versionVector.map { "\($0.origin)/\($0.epoch): \($0.sequence)" }.joined(separator: ", ")))
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
        return lines
    }
}
