/// Every metric a node exports, named once, with its help text. swift-metrics gives
/// swift-prometheus no help text, so the `/metrics` endpoint adds each `# HELP` line from here
/// (``withHelp(_:)``); a test checks that every family the node emits is listed.
public struct MetricCatalog: Sendable {
    public let name: String
    public let help: String

    static let requests = MetricCatalog(name: "registry_requests_total", help: "Client requests answered, errors included.")
    static let requestDuration = MetricCatalog(
        name: "registry_request_duration_seconds", help: "From a request's arrival at the engine to its answer, durable writes included.")
    static let registrations = MetricCatalog(
        name: "registry_registrations_total",
        help: "Registrations answered, by outcome: created (a new device), matched (an existing one), merged (devices joined).")
    static let errors = MetricCatalog(name: "registry_errors_total", help: "Errors sent, by code (request and connection errors).")
    static let connections = MetricCatalog(name: "registry_connections", help: "Open client and peer connections to this node.")
    static let connectionsByRole = MetricCatalog(
        name: "registry_connections_by_role", help: "Open connections that said hello, by role: client, admin, peer.")
    static let commitDuration = MetricCatalog(
        name: "registry_commit_duration_seconds", help: "Time to make one group commit durable (write and fdatasync).")
    static let commitOperations = MetricCatalog(name: "registry_commit_operations", help: "Operations per group commit.")
    static let hlcRefusals = MetricCatalog(
        name: "registry_hlc_refusals_total", help: "Peer batches refused because their hybrid logical clock ran too far ahead.")
    static let causalWaits = MetricCatalog(
        name: "registry_causal_waits_total",
        help: "Request groups held because a causal token named operations this node did not hold yet (NOT_CAUGHT_UP counts those that timed out).")
    static let logBytes = MetricCatalog(name: "registry_log_bytes", help: "Bytes of journal files kept on disk.")
    static let logOperations = MetricCatalog(name: "registry_log_operations", help: "Operations this node holds, over every log.")
    static let snapshotAge = MetricCatalog(
        name: "registry_snapshot_age_seconds", help: "Seconds since this node last wrote a snapshot; -1 when it has written none since it started.")
    static let devices = MetricCatalog(name: "registry_devices", help: "Canonical devices held.")
    static let replicationBacklog = MetricCatalog(
        name: "registry_replication_backlog_operations", help: "Operations this node holds that the peer is not known to hold.")
    static let replicationLag = MetricCatalog(
        name: "registry_replication_lag_seconds", help: "Age of the oldest operation sent to the peer and not yet acknowledged.")
    static let peerLinks = MetricCatalog(name: "registry_peer_links", help: "Links to peers, by state.")
    static let httpRejections = MetricCatalog(
        name: "registry_http_rejections_total", help: "Metrics-port requests refused, by reason: not_found, method_not_allowed, bad_request.")
    static let tlsHandshakeFailures = MetricCatalog(
        name: "registry_tls_handshake_failures_total", help: "TLS handshakes on the node's port that failed: plaintext, untrusted certificates.")
    static let ready = MetricCatalog(name: "registry_ready", help: "1 when /readyz answers 200, else 0.")

    static let all: [MetricCatalog] = [
        requests, requestDuration, registrations, errors, connections, connectionsByRole, commitDuration, commitOperations,
        hlcRefusals, causalWaits, logBytes, logOperations, snapshotAge, devices, replicationBacklog, replicationLag, peerLinks,
        httpRejections, tlsHandshakeFailures, ready,
    ]

    /// `exposition` (Prometheus text format) with a `# HELP` line before each family's
    /// `# TYPE` line, for the families listed here.
    static func withHelp(_ exposition: String) -> String {
        let help = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0.help) })
        var out = ""
        out.reserveCapacity(exposition.utf8.count + all.count * 80)
        for line in exposition.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst(7).prefix { $0 != " " }
                if let text = help[String(name)] { out += "# HELP \(name) \(text)\n" }
            }
            out += line
            out += "\n"
        }
        if out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}
