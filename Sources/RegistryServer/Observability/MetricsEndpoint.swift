import Metrics
import NIOHTTP1
import Prometheus
import Synchronization

/// What the metrics port answers: the Prometheus exposition of everything the node recorded
/// through swift-metrics (with node-level gauges refreshed from its stats on each scrape),
/// liveness, and readiness. It exists before the engine does, so that `/healthz` answers and
/// `/readyz` says "not ready" while the journal replays.
public final class MetricsEndpoint: Sendable {
    struct Answer: Equatable {
        let status: HTTPResponseStatus
        let contentType: String
        let body: String
    }

    private let registry: PrometheusCollectorRegistry
    private let engine = Mutex<RegistryEngine?>(nil)

    /// The swift-prometheus registry that `MetricsSystem` was bootstrapped with.
    public init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    /// The node's storage is open and its journal replayed.
    public func attach(_ engine: RegistryEngine) {
        self.engine.withLock { $0 = engine }
    }

    func rejected(_ reason: String) {
        Counter(label: MetricCatalog.httpRejections.name, dimensions: [("reason", reason)]).increment()
    }

    func answer(_ route: MetricsRoute) -> Answer {
        let text = "text/plain; charset=utf-8"
        switch route {
        case .health:
            return Answer(status: .ok, contentType: text, body: "ok\n")
        case .readiness:
            switch Readiness.evaluate(engine.withLock { $0 }?.stats()) {
            case .ready: return Answer(status: .ok, contentType: text, body: "ready\n")
            case .notReady(let reason): return Answer(status: .serviceUnavailable, contentType: text, body: "not ready: \(reason)\n")
            }
        case .metrics:
            refreshGauges()
            return Answer(
                status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: MetricCatalog.withHelp(registry.emitToString()))
        case .rejected(let status, let reason):
            rejected(reason)
            return Answer(status: HTTPResponseStatus(statusCode: status), contentType: text, body: "\(reason.replacingOccurrences(of: "_", with: " "))\n")
        }
    }

    /// The gauges that describe the node as a whole, set from its stats as of this scrape.
    private func refreshGauges() {
        let stats = engine.withLock { $0 }?.stats()
        Gauge(label: MetricCatalog.ready.name).record(Readiness.evaluate(stats) == .ready ? 1 : 0)
        guard let stats else { return }
        Gauge(label: MetricCatalog.logBytes.name).record(stats.journalBytes)
        Gauge(label: MetricCatalog.logOperations.name).record(stats.logOperations)
        Gauge(label: MetricCatalog.devices.name).record(stats.deviceCount)
        Gauge(label: MetricCatalog.snapshotAge.name).record(stats.snapshotBytes == 0 ? -1 : Double(stats.snapshotAgeMillis) / 1_000)
        var states = [String: Int]()
        for peer in stats.peers where peer.state != "own-address" {
            let name = peer.nodeID.isEmpty ? peer.address : peer.nodeID
            Gauge(label: MetricCatalog.replicationBacklog.name, dimensions: [("peer", name)]).record(peer.backlogOperations)
            Gauge(label: MetricCatalog.replicationLag.name, dimensions: [("peer", name)]).record(Double(peer.lagMillis) / 1_000)
            states[peer.state, default: 0] += 1
        }
        for state in ["disconnected", "connecting", "handshaking", "streaming"] {
            Gauge(label: MetricCatalog.peerLinks.name, dimensions: [("state", state)]).record(states[state] ?? 0)
        }
    }
}
