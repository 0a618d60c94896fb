/// What the metrics port does with one HTTP request line, decided without I/O: `/metrics`,
/// `/healthz` and `/readyz` by GET (or HEAD); any other path is 404 and any other method 405,
/// each counted by reason (``MetricCatalog/httpRejections``).
enum MetricsRoute: Equatable, Sendable {
    case metrics
    case health
    case readiness
    case rejected(status: Int, reason: String)

    init(method: String, uri: String) {
        let path = uri.prefix { $0 != "?" }
        guard method == "GET" || method == "HEAD" else {
            self = .rejected(status: 405, reason: "method_not_allowed")
            return
        }
        switch path {
        case "/metrics": self = .metrics
        case "/healthz": self = .health
        case "/readyz": self = .readiness
        default: self = .rejected(status: 404, reason: "not_found")
        }
    }
}
