/// What a node holds of every log, as a plain value: for each (origin node, epoch), the highest
/// sequence number up to which it holds every operation. Operations are numbered from 1 without
/// gaps within their (origin, epoch), so one number per log says exactly what is held.
///
/// Every operation that reaches a node (its own, replayed from its log, or a peer's) is admitted
/// through ``admission(of:)`` first: one already held is a duplicate to skip, the next one is
/// applied and recorded with ``record(_:)``, and one beyond the next would leave a gap, so it must
/// be held back or asked for again, never applied.
public struct VersionVector: Equatable, Sendable, CustomStringConvertible {
    /// The largest sequence a log position read from outside may name (a peer's or a client's
    /// positions, a snapshot's header). No log comes near it (at ten million operations a second,
    /// a log reaches it in about 14,000 years), and every sequence read in stays below it, so
    /// that a position plus one, or the sum of a few, never overflows: a peer that sent
    /// `UInt64.max` made the link sending to it trap on its next run.
    public static let largestSequence: UInt64 = 1 << 62

    /// Whether a position read from outside names a log this code can hold: an epoch above 0
    /// (every log's is) and a sequence up to ``largestSequence``.
    public static func isReadable(epoch: UInt64, sequence: UInt64) -> Bool {
        epoch > 0 && sequence <= largestSequence
    }

    /// Where an operation stands against what is held.
    public enum Admission: Equatable, Sendable {
        /// The next operation of its log: apply it, then ``record(_:)`` it.
        case next
        /// Already held: skip it.
        case duplicate
        /// Operations `missing` of its log come before it and are not held: it must wait.
        case gap(missing: ClosedRange<UInt64>)
    }

    private var held: [LogID: UInt64] = [:]

    public init() {}

    /// The highest sequence of `log` up to which every operation is held; 0 when none is.
    public subscript(log: LogID) -> UInt64 {
        held[log] ?? 0
    }

    /// Where operation `sequence` of `log` stands.
    public func admission(of sequence: UInt64, in log: LogID) -> Admission {
        precondition(sequence >= 1, "operations are numbered from 1")
        let have = self[log]
        if sequence <= have { return .duplicate }
        if sequence == have + 1 { return .next }
        return .gap(missing: (have + 1)...(sequence - 1))
    }

    /// Records that operation `sequence` of `log`, the next one, is now held.
    public mutating func record(_ sequence: UInt64, in log: LogID) {
        precondition(admission(of: sequence, in: log) == .next, "\(log): recorded \(sequence) after \(self[log])")
        held[log] = sequence
    }

    /// Records that every operation of `log` up to `sequence` is held, at least what was held:
    /// for a log whose operations the caller has checked are all held, such as one replayed in
    /// order, or the node's own, which it numbers itself.
    public mutating func recordAll(through sequence: UInt64, in log: LogID) {
        precondition(sequence >= self[log], "\(log): recorded through \(sequence) after \(self[log])")
        if sequence > 0 { held[log] = sequence }
    }

    /// Every log held, to the sequence it is held through.
    public var sequences: [LogID: UInt64] { held }

    /// Every log with something held, in order of origin and epoch.
    public var logs: [(log: LogID, sequence: UInt64)] {
        held.sorted { $0.key < $1.key }.map { (log: $0.key, sequence: $0.value) }
    }

    public var description: String {
        logs.map { "\($0.log): \($0.sequence)" }.joined(separator: ", ")
    }
}

extension VersionVector {
    /// Raises `log` to `sequence` when that is more than held; a lower sequence changes nothing.
    /// For a vector that names what was seen rather than what was admitted one by one.
    public mutating func raise(to sequence: UInt64, in log: LogID) {
        if sequence > self[log] { recordAll(through: sequence, in: log) }
    }

    /// Every log at the higher of the two vectors' sequences.
    public func joined(with other: VersionVector) -> VersionVector {
        var joined = self
        for (log, sequence) in other.sequences { joined.raise(to: sequence, in: log) }
        return joined
    }

    /// How many operations this vector holds that `other` lacks: over every log, how far this
    /// one is ahead (saturating at `UInt64.max`).
    public func operationsAhead(of other: VersionVector) -> UInt64 {
        var ahead: UInt64 = 0
        for (log, sequence) in held where sequence > other[log] {
            let (sum, overflow) = ahead.addingReportingOverflow(sequence - other[log])
            ahead = overflow ? .max : sum
        }
        return ahead
    }

    /// Whether this vector holds everything `other` holds.
    public func covers(_ other: VersionVector) -> Bool {
        other.sequences.allSatisfy { self[$0.key] >= $0.value }
    }
}
