import RegistryCore
import RegistryWire
@testable import RegistryServer

extension NodeState {
    /// Answers `frame` as the engine would, through `prepare` and `decide`, appending any state
    /// change to `operations`: one request at a time, with no connection's access limits.
    mutating func handle(
        _ frame: ClientFrame, wallMillis: UInt64, generator: inout some RandomNumberGenerator,
        operations: inout [LoggedOperation]
    ) -> ServerBody {
        var resolver = BundleResolver(rules: rules, capacity: 0)
        let prepared = Self.prepare(frame.body, resolver: &resolver, limits: limits, identifierKey: identifierKey)
        return decide(prepared, requestID: frame.requestID, wallMillis: wallMillis, generator: &generator, operations: &operations)
            .body
    }
}

extension NodeState {
    /// A node alone, with the default vendor rules and limits.
    static func alone() -> NodeState {
        NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: "node-a"), epoch: 1, nextSequence: 1, rules: try! VendorRules(),
            limits: .default)
    }

    /// Answers `body` as the engine would for a connection with `access`: prepared through the
    /// access's checks (``ConnectionAccess/prepare(_:resolver:limits:identifierKey:)``), then decided.
    mutating func answer(_ body: ClientBody, access: ConnectionAccess) -> ServerBody {
        var resolver = BundleResolver(rules: rules, capacity: 0)
        let prepared = access.prepare(body, resolver: &resolver, limits: limits, identifierKey: identifierKey)
        var generator = SplitMix64(seed: 7)
        var operations = [LoggedOperation]()
        return decide(prepared, requestID: 1, wallMillis: 1_000, generator: &generator, operations: &operations, access: access).body
    }
}
