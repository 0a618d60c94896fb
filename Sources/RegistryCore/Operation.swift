/// A state change as it is logged and replicated. Applying one is idempotent and commutes with
/// every other, so replicas converge whatever order operations arrive in.
///
/// A registration, nearly every operation a node handles, is held in place: its fields are plain
/// data but for the merged devices (an array, nearly always the empty one), so a copy is a copy of
/// its bytes and one retain, and an operation decoded or decided costs no allocation. The cases
/// larger than a registration (a vendor rule change, a clone mark) are `indirect` (a box on the
/// heap), so that they add nothing to every operation's size (`OperationLayoutTests` keeps both);
/// the other rare cases are boxed too, so that a copy of one, strings and all, is one retain
/// (docs/performance.md, "Registrations in place").
public enum Operation: Hashable, Sendable {
    case registration(RegistrationOp)
    indirect case membership(MembershipOp)
    /// An account bound to, or unbound from, a device (``AccountBindings`` says what it does).
    indirect case binding(BindingChange)
    /// A device erased (``ForgetOp`` says what it does).
    indirect case forget(ForgetOp)
    /// A change of the cluster's vendor rules (``VendorRuleHistory`` says what it does).
    indirect case vendorRule(VendorRuleChange)
    /// A suspected keychain clone, flagged or split (``CloneOp`` says what it does).
    indirect case clone(CloneOp)
}

/// One registration as it changed the state.
public struct RegistrationOp: Hashable, Sendable {
    /// The device the registration resolved to.
    public let device: DeviceRef
    public let bundle: BundleID
    /// Identifiers claimed for `device`. A claim that meets another device's claim merges them.
    public let claims: IdentifierList
    /// Other devices found to be the same physical device; each is merged with `device`.
    public let merged: [DeviceRef]
    /// When the app was seen.
    public let seen: HLCTimestamp

    public init(device: DeviceRef, bundle: BundleID, claims: IdentifierList, merged: [DeviceRef], seen: HLCTimestamp) {
        self.device = device
        self.bundle = bundle
        self.claims = claims
        self.merged = merged
        self.seen = seen
    }
}

/// An operation with its place in a node's log: (origin, epoch, sequence) names it uniquely,
/// and the HLC stamps it.
///
/// Equality and hashing are the operation's and its place's: ``encoded`` is how the bytes came,
/// not part of the value.
public struct LoggedOperation: Hashable, Sendable {
    public let origin: NodeID
    public let epoch: UInt64
    public let sequence: UInt64
    public let timestamp: HLCTimestamp
    public let operation: Operation
    /// The operation as it arrived in a peer's batch, a `registry.v1.Operation` as the sender's
    /// journal held it; nil when it was not decoded from a batch (one this node made, or read from
    /// its own journal). The journal writes these bytes as they are rather than encoding the
    /// operation again (docs/performance.md, "A peer's operation journaled as it came"), so fields
    /// this version does not know are kept, and while every node on the way runs this version a
    /// replicated operation is journaled everywhere as its origin encoded it. When a commit's
    /// segment holds only such operations, the records kept for the peer links slice these bytes
    /// too. They must decode to ``operation``.
    public let encoded: ArraySlice<UInt8>?

    /// - Parameter encoded: the bytes `operation` was decoded from, when it came in a peer's
    ///   batch (see ``encoded``); nil otherwise.
    public init(
        origin: NodeID, epoch: UInt64, sequence: UInt64, timestamp: HLCTimestamp, operation: Operation, encoded: ArraySlice<UInt8>? = nil
    ) {
        self.origin = origin
        self.epoch = epoch
        self.sequence = sequence
        self.timestamp = timestamp
        self.operation = operation
        self.encoded = encoded
    }

    /// The log it belongs to.
    public var log: LogID { LogID(origin: origin, epoch: epoch) }

    public static func == (lhs: LoggedOperation, rhs: LoggedOperation) -> Bool {
        lhs.origin == rhs.origin && lhs.epoch == rhs.epoch && lhs.sequence == rhs.sequence && lhs.timestamp == rhs.timestamp
            && lhs.operation == rhs.operation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(origin)
        hasher.combine(epoch)
        hasher.combine(sequence)
        hasher.combine(timestamp)
        hasher.combine(operation)
    }
}

extension Array where Element == LoggedOperation {
    /// The operations cut into runs of one log each (consecutive operations of one origin and
    /// epoch), in order: what a commit or a peer's batch holds, a few runs long. Each operation's
    /// origin and epoch are compared where they lie: a copy of the operation would retain and
    /// release its parts.
    public var runsByLog: [(log: LogID, range: Range<Int>)] {
        var runs = [(log: LogID, range: Range<Int>)]()
        var index = startIndex
        while index < endIndex {
            let log = LogID(origin: self[index].origin, epoch: self[index].epoch)
            var end = index + 1
            while end < endIndex, self[end].epoch == log.epoch, self[end].origin == log.origin { end += 1 }
            runs.append((log, index..<end))
            index = end
        }
        return runs
    }
}
