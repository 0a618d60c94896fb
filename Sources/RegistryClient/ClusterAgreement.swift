import RegistryWire

/// What the stats of a cluster's nodes say about whether they hold the same content: a pure
/// judgement over ``StatsMessage``s, shared by `registryctl cluster status|verify` and the tests.
///
/// Nodes with equal version vectors have applied the same operations, so they must hold the same
/// canonical state and report the same ``StatsMessage/stateDigest``. Counts cannot show this: a
/// node that reused a (node, epoch, sequence) for other content reports the same counts.
public enum ClusterAgreement: Equatable, Sendable {
    /// Every node holds the same operations and the same content (digest).
    case converged(digest: UInt64)
    /// The nodes hold different operations (still replicating); no pair with equal vectors
    /// disagrees.
    case catchingUp
    /// Nodes that hold the same operations but different content: a group per vector, each a
    /// list of (node ID, digest).
    case diverged([[NodeDigest]])

    /// A node's ID and digest.
    public struct NodeDigest: Equatable, Sendable {
        public let node: String
        public let digest: UInt64
    }

    /// Judges `stats`, one per node.
    public init(_ stats: [StatsMessage]) {
        var groups = [[LogPosition]: [NodeDigest]]()
        var order = [[LogPosition]]()
        for node in stats {
            let vector = node.versionVector.sorted { ($0.origin, $0.epoch) < ($1.origin, $1.epoch) }
            if groups[vector] == nil { order.append(vector) }
            groups[vector, default: []].append(NodeDigest(node: node.nodeID, digest: node.stateDigest))
        }
        let split = order.compactMap { groups[$0] }.filter { Set($0.map(\.digest)).count > 1 }
        if !split.isEmpty {
            self = .diverged(split)
        } else if order.count == 1, let digest = stats.first?.stateDigest {
            self = .converged(digest: digest)
        } else {
            self = .catchingUp
        }
    }

    /// One line for people.
    public var summary: String {
        switch self {
        case .converged(let digest): return "converged: every node holds the same operations and content (digest \(Self.hex(digest)))"
        case .catchingUp: return "catching up: the nodes hold different operations so far"
        case .diverged(let groups):
            let text = groups.map { group in group.map { "\($0.node) \(Self.hex($0.digest))" }.joined(separator: " / ") }
            return "DIVERGED: nodes hold the same operations but different content: " + text.joined(separator: "; ")
        }
    }

    public static func hex(_ digest: UInt64) -> String {
        let text = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
