import Foundation
import RegistryClient
import RegistryWire

/// Something registryctl prints: stable JSON, or aligned rows for people.
protocol Printable: Encodable {
    var rows: [(String, String)] { get }
    /// Extra lines after the rows (a nested table), table mode only.
    var trailer: [String] { get }
}

extension Printable {
    var trailer: [String] { [] }
}

enum Output {
    static func print(_ value: some Printable, format: OutputFormat) {
        switch format {
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
            Swift.print(String(decoding: data, as: UTF8.self))
        case .table:
            let width = value.rows.map(\.0.count).max() ?? 0
            for (key, text) in value.rows {
                Swift.print(key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + text)
            }
            for line in value.trailer { Swift.print(line) }
        }
    }

    /// `2026-11-22T01:50:00.123Z`.
    static func time(_ millis: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1_000))
    }

    /// `812 B`, `3.4 MiB`, `12.1 GiB`.
    static func bytes(_ count: UInt64) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = "B"
        for next in units where value >= 1024 {
            value /= 1024
            unit = next
        }
        return unit == "B" ? "\(count) B" : String(format: "%.1f", value) + " " + unit
    }

    static func duration(_ millis: UInt64) -> String {
        let seconds = millis / 1_000
        let (days, hours, minutes) = (seconds / 86_400, seconds / 3_600 % 24, seconds / 60 % 60)
        if days > 0 { return "\(days)d \(hours)h \(minutes)m" }
        if hours > 0 { return "\(hours)h \(minutes)m \(seconds % 60)s" }
        return "\(minutes)m \(seconds % 60)s"
    }
}

struct StatusView: Printable {
    let node: String
    let cluster: String
    let version: String
    let uptimeMs: UInt64
    let devices: UInt64
    let aliases: UInt64
    let claims: UInt64
    let requestsServed: UInt64
    let connections: UInt64
    let log: Log
    /// What the node holds of every log: (origin, epoch) and the sequence up to which it holds all.
    let versionVector: [LogPosition]
    let errors: [String: UInt64]
    /// This node's links to its peers.
    let peers: [PeerLinkReport]
    /// The order-independent digest of its state, in hexadecimal.
    let stateDigest: String
    /// Why it refuses writes now; empty while it takes them.
    let writeRefusal: String

    struct Log: Encodable {
        let operations: UInt64
        let commits: UInt64
        let epoch: UInt64
        let sequence: UInt64
        /// How long commits took since the node started (journal write and fdatasync).
        let commitLatency: LatencyBuckets.Summary?
        /// The journal kept on disk: what the snapshots do not yet let go.
        let journalBytes: UInt64
        let journalFiles: UInt64
        /// Operations the newest snapshot covers, how long ago the last was taken, and its size.
        let snapshotOperations: UInt64
        let snapshotAgeMs: UInt64
        let snapshotBytes: UInt64
    }

    init(_ stats: StatsMessage) {
        node = stats.nodeID
        cluster = stats.clusterID
        version = stats.serverVersion
        uptimeMs = stats.uptimeMillis
        devices = stats.deviceCount
        aliases = stats.aliasCount
        claims = stats.claimCount
        requestsServed = stats.requestsServed
        connections = stats.connections
        log = Log(
            operations: stats.logOperations, commits: stats.logCommits, epoch: stats.logEpoch, sequence: stats.logSequence,
            commitLatency: stats.commitLatency.summary, journalBytes: stats.journalBytes, journalFiles: stats.journalFiles,
            snapshotOperations: stats.snapshotOperations, snapshotAgeMs: stats.snapshotAgeMillis, snapshotBytes: stats.snapshotBytes)
        versionVector = stats.versionVector
        errors = stats.errorsByName
        peers = stats.peers
        stateDigest = ClusterAgreement.hex(stats.stateDigest)
        writeRefusal = stats.writeRefusal
    }

    var rows: [(String, String)] {
        [
            ("node", node), ("cluster", cluster), ("version", version), ("uptime", Output.duration(uptimeMs)),
            ("writes", writeRefusal.isEmpty ? "taken" : "REFUSED: \(writeRefusal)"),
            ("devices", "\(devices)"), ("aliases", "\(aliases)"), ("claims", "\(claims)"),
            ("requests served", "\(requestsServed)"), ("connections", "\(connections)"),
            ("log", "\(log.operations) operations, \(log.commits) commits since start, epoch \(log.epoch), sequence \(log.sequence)"),
            ("commit time", log.commitLatency.map { "\($0) (journal write and fdatasync, since start)" } ?? "no commits yet"),
            ("journal", "\(Output.bytes(log.journalBytes)) in \(log.journalFiles) file\(log.journalFiles == 1 ? "" : "s") (what the snapshots do not cover yet)"),
            (
                "snapshot",
                log.snapshotOperations == 0
                    ? "none yet"
                    : "covers \(log.snapshotOperations) operations, last taken \(Output.duration(log.snapshotAgeMs)) ago"
                        + (log.snapshotBytes > 0 ? " (\(Output.bytes(log.snapshotBytes)))" : "")
            ),
            (
                "version vector",
                versionVector.isEmpty
                    ? "nothing held yet" : versionVector.map { "\($0.origin)/\($0.epoch): \($0.sequence)" }.joined(separator: ", ")
            ),
            ("state digest", stateDigest),
            ("errors", errors.isEmpty ? "none" : errors.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")),
            (
                "peers",
                peers.filter { $0.state != "own-address" }.isEmpty
                    ? "none (a single node)"
                    : peers.filter { $0.state != "own-address" }.map { "\($0.address) \($0.state), lag \($0.backlogOperations) operations" }
                        .joined(separator: "; ")
            ),
        ]
    }
}

struct DeviceView: Printable {
    let deviceId: String
    let vendor: String
    let createdAt: String
    let createdHlc: UInt64
    let originNode: String
    let aliases: [String]
    let apps: [App]

    struct App: Encodable {
        let bundleId: String
        let firstSeen: String
        let lastSeen: String
    }

    init(_ record: DeviceRecordMessage) {
        deviceId = record.deviceID
        vendor = record.vendor
        createdAt = Output.time(record.createdAtMillis)
        createdHlc = record.createdHLC
        originNode = record.originNodeID
        aliases = record.aliasIDs
        apps = record.apps.map {
            App(bundleId: $0.bundleID, firstSeen: Output.time($0.firstSeenMillis), lastSeen: Output.time($0.lastSeenMillis))
        }
    }

    var rows: [(String, String)] {
        [
            ("device", deviceId), ("vendor", vendor), ("created", "\(createdAt) on \(originNode)"),
            ("aliases", aliases.isEmpty ? "none" : aliases.joined(separator: ", ")),
        ]
    }

    var trailer: [String] {
        let width = max(apps.map(\.bundleId.count).max() ?? 0, "APP".count)
        let header = "APP".padding(toLength: width, withPad: " ", startingAt: 0) + "  FIRST SEEN                LAST SEEN"
        return ["", header]
            + apps.map {
                $0.bundleId.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.firstSeen + "  " + $0.lastSeen
            }
    }
}

struct SnapshotView: Printable {
    let operations: UInt64
    let bytes: UInt64
    let durationMs: UInt64
    let journalFilesRemoved: UInt64

    init(_ taken: SnapshotTaken) {
        operations = taken.operations
        bytes = taken.bytes
        durationMs = taken.durationMillis
        journalFilesRemoved = taken.journalFilesRemoved
    }

    var rows: [(String, String)] {
        [
            ("snapshot", "covers \(operations) operations" + (bytes > 0 ? ", \(Output.bytes(bytes))" : ", nothing new since the last")),
            ("took", "\(durationMs) ms"), ("journal files removed", "\(journalFilesRemoved)"),
        ]
    }
}

struct RegisterView: Printable {
    let deviceId: String
    let created: Bool
    let vendor: String
    let replacedDeviceIds: [String]
    let rejectedIdentifiers: [String]

    init(_ result: RegisterResult) {
        deviceId = result.deviceID
        created = result.created
        vendor = result.vendor
        replacedDeviceIds = result.replacedDeviceIDs
        rejectedIdentifiers = result.rejectedIdentifiers.map { "kind \($0.rawKind): \($0.text)" }
    }

    var rows: [(String, String)] {
        var rows = [("device", deviceId), ("created", created ? "yes" : "no"), ("vendor", vendor)]
        if !replacedDeviceIds.isEmpty { rows.append(("replaced", replacedDeviceIds.joined(separator: ", "))) }
        if !rejectedIdentifiers.isEmpty { rows.append(("ignored", rejectedIdentifiers.joined(separator: "; "))) }
        return rows
    }
}
