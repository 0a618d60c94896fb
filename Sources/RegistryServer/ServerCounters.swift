import Platform
import Dispatch
import Metrics
import RegistryCore
import RegistryWire
import Synchronization

/// Requests served, errors by code and open connections, for the Stats request; mirrored to
/// swift-metrics, with registrations by outcome, request latency, connections by role and HLC
/// refusals, for whatever metrics backend the process bootstraps (``MetricCatalog`` names them).
final class ServerCounters: Sendable {
    private let served = Atomic<UInt64>(0)
    private let errors = Mutex<[ErrorCode: UInt64]>([:])
    private let openConnections = Atomic<Int>(0)

    private let requestsMetric = Counter(label: MetricCatalog.requests.name)
    private let connectionsMetric = Gauge(label: MetricCatalog.connections.name)
    private let requestLatency = Metrics.Timer(label: MetricCatalog.requestDuration.name)
    private let created = Counter(label: MetricCatalog.registrations.name, dimensions: [("outcome", "created")])
    private let matched = Counter(label: MetricCatalog.registrations.name, dimensions: [("outcome", "matched")])
    private let merged = Counter(label: MetricCatalog.registrations.name, dimensions: [("outcome", "merged")])
    /// Peer batches refused because their clock ran too far ahead.
    let hlcRefusals = Counter(label: MetricCatalog.hlcRefusals.name)
    /// Request groups held until this node held what their causal tokens name.
    let causalWaits = Counter(label: MetricCatalog.causalWaits.name)
    private let byRole = Mutex<[String: Int]>([:])

    /// Counts `answers` (client requests; peers' batches are not requests), their errors and
    /// registration outcomes, and, when `submittedNanos` is set, each request's latency.
    func record(_ answers: [NodeState.Decision], submittedNanos: UInt64 = 0) {
        var requests = 0
        var outcomes = (created: 0, matched: 0, merged: 0)
        func count(_ outcome: Result<RegistrationOutcome, WireError>) {
            switch outcome {
            case .success(let result) where result.created: outcomes.created += 1
            case .success(let result) where !result.replaced.isEmpty: outcomes.merged += 1
            case .success: outcomes.matched += 1
            case .failure(let error): record(error: error.code)
            }
        }
        for answer in answers {
            switch answer {
            case .registered(let outcome): count(outcome)
            case .registeredBatch(let items): for item in items { count(item) }
            case .answer(.error(let error)): record(error: error.code)
            case .answer: break
            }
            requests += 1
        }
        served.add(UInt64(requests), ordering: .relaxed)
        requestsMetric.increment(by: Int64(requests))
        if outcomes.created > 0 { created.increment(by: Int64(outcomes.created)) }
        if outcomes.matched > 0 { matched.increment(by: Int64(outcomes.matched)) }
        if outcomes.merged > 0 { merged.increment(by: Int64(outcomes.merged)) }
        if submittedNanos > 0, requests > 0 {
            let elapsed = Int64(SystemClock.monotonicNanos() - submittedNanos)
            for _ in 0..<requests { requestLatency.recordNanoseconds(elapsed) }
        }
    }

    /// A TLS handshake on the node's port failed (plaintext, an untrusted certificate, ...).
    func tlsHandshakeFailed() {
        Counter(label: MetricCatalog.tlsHandshakeFailures.name).increment()
    }

    /// Counts an error sent outside a request/response pair (connection-level).
    func record(error code: ErrorCode) {
        errors.withLock { $0[code, default: 0] += 1 }
        Counter(label: MetricCatalog.errors.name, dimensions: [("code", code.name)]).increment()
    }

    func connectionOpened() {
        connectionsMetric.record(openConnections.add(1, ordering: .relaxed).newValue)
    }

    func connectionClosed() {
        connectionsMetric.record(openConnections.subtract(1, ordering: .relaxed).newValue)
    }

    /// A connection said hello as `role` (client, admin, peer), or, `by: -1`, one that had
    /// closed.
    func connection(role: String, by change: Int) {
        let count = byRole.withLock { counts -> Int in
            counts[role, default: 0] += change
            return counts[role]!
        }
        Gauge(label: MetricCatalog.connectionsByRole.name, dimensions: [("role", role)]).record(count)
    }

    var requestsServed: UInt64 { served.load(ordering: .relaxed) }
    var errorCounts: [ErrorCode: UInt64] { errors.withLock { $0 } }
    var connections: Int { openConnections.load(ordering: .relaxed) }
}
