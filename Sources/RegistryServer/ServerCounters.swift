import Metrics
import RegistryWire
import Synchronization

/// Requests served, errors by code and open connections, for the Stats request; mirrored to
/// swift-metrics (`registry_requests_total`, `registry_errors_total{code}`,
/// `registry_connections`) for whatever metrics backend the process bootstraps.
final class ServerCounters: Sendable {
    private let served = Atomic<UInt64>(0)
    private let errors = Mutex<[ErrorCode: UInt64]>([:])
    private let openConnections = Atomic<Int>(0)

    private let requestsMetric = Counter(label: "registry_requests_total")
    private let connectionsMetric = Gauge(label: "registry_connections")

    func record(_ answers: [NodeState.Decision]) {
        let requests = answers.count { if case .replicated = $0 { false } else { true } }
        served.add(UInt64(requests), ordering: .relaxed)
        requestsMetric.increment(by: Int64(requests))
        for answer in answers {
            switch answer {
            case .registered(.failure(let error)), .answer(.error(let error)):
                record(error: error.code)
            case .registeredBatch(let items):
                for case .failure(let error) in items { record(error: error.code) }
            default:
                break
            }
        }
    }

    /// Counts an error sent outside a request/response pair (connection-level).
    func record(error code: ErrorCode) {
        errors.withLock { $0[code, default: 0] += 1 }
        Counter(label: "registry_errors_total", dimensions: [("code", code.name)]).increment()
    }

    func connectionOpened() {
        connectionsMetric.record(openConnections.add(1, ordering: .relaxed).newValue)
    }

    func connectionClosed() {
        connectionsMetric.record(openConnections.subtract(1, ordering: .relaxed).newValue)
    }

    var requestsServed: UInt64 { served.load(ordering: .relaxed) }
    var errorCounts: [ErrorCode: UInt64] { errors.withLock { $0 } }
    var connections: Int { openConnections.load(ordering: .relaxed) }
}
