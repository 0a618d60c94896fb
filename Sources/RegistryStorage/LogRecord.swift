import RegistryCore

/// One operation as the log stores it: its place, (origin, epoch, sequence), its HLC, and its
/// encoded payload (a `registry.v1.Operation`, which storage does not look into).
public struct LogRecord: Hashable, Sendable {
    public let origin: String
    public let epoch: UInt64
    public let sequence: UInt64
    public let hlc: UInt64
    /// A slice of bytes that many records share (a stored blob, a copy of a journal segment just
    /// written, the batch of a peer the operation came in, or a copy of the operations applied
    /// of such a batch): copying them out one array a record was an allocation an operation
    /// (`docs/performance.md`, "Allocations a registration makes").
    public let payload: ArraySlice<UInt8>

    public init(origin: String, epoch: UInt64, sequence: UInt64, hlc: UInt64, payload: ArraySlice<UInt8>) {
        self.origin = origin
        self.epoch = epoch
        self.sequence = sequence
        self.hlc = hlc
        self.payload = payload
    }

    /// The log the record belongs to.
    public var log: LogID { LogID(origin: NodeID(trusted: origin), epoch: epoch) }
}
