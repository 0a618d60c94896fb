/// One log of the cluster: an origin node and one of its epochs. Every node writes one log per
/// start (``VersionVector`` says how much of each a node holds); storage names journal segments,
/// trimming and snapshots by it, and the wire writes it as a `LogPosition`'s origin and epoch.
public struct LogID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let origin: NodeID
    public let epoch: UInt64

    public init(origin: NodeID, epoch: UInt64) {
        self.origin = origin
        self.epoch = epoch
    }

    public static func < (a: LogID, b: LogID) -> Bool {
        a.origin != b.origin ? a.origin < b.origin : a.epoch < b.epoch
    }

    public var description: String { "\(origin)/\(epoch)" }
}
