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
