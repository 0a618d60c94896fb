/// The connections of a run that closed before it ended, each as "endpoint: reason".
public struct LostConnections: Equatable, Sendable {
    public var reasons: [String]
    /// Connections the run opened.
    public var connections: Int

    public init(reasons: [String] = [], connections: Int = 0) {
        self.reasons = reasons
        self.connections = connections
    }
}
