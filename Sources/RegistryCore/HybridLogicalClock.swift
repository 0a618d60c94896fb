/// A hybrid-logical-clock value: 48 bits of Unix milliseconds, then a 16-bit counter.
/// Comparing raw values orders events causally on a node and ties them across nodes.
public struct HLCTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public static let maxMillis: UInt64 = (1 << 48) - 1
    public static let zero = HLCTimestamp(rawValue: 0)

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public init(millis: UInt64, counter: UInt16) {
        rawValue = (millis & Self.maxMillis) << 16 | UInt64(counter)
    }

    public var millis: UInt64 { rawValue >> 16 }
    public var counter: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public var description: String { "\(millis).\(counter)" }

    public static func < (lhs: HLCTimestamp, rhs: HLCTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A hybrid logical clock (Kulkarni et al., 2014) as a plain value: the caller passes the wall
/// time, so it is deterministic under test. It never goes backwards, even when the wall clock
/// does, and it refuses remote timestamps too far ahead of the local wall clock.
///
/// It only orders events and breaks ties; no correctness property depends on synchronised clocks.
public struct HybridLogicalClock: Sendable {
    /// Why a remote timestamp was refused.
    public enum Refusal: Error, Equatable, Sendable {
        /// The remote timestamp is `aheadMillis` ahead of local wall time, more than allowed.
        case tooFarAhead(remote: HLCTimestamp, aheadMillis: UInt64, limitMillis: UInt64)
    }

    /// The last timestamp issued or observed; persist it to keep the clock monotonic across restarts.
    public private(set) var last: HLCTimestamp
    /// How far ahead of local wall time a remote timestamp may be.
    public let maxForwardDriftMillis: UInt64

    public init(last: HLCTimestamp = .zero, maxForwardDriftMillis: UInt64 = 60_000) {
        self.last = last
        self.maxForwardDriftMillis = maxForwardDriftMillis
    }

    /// A timestamp for a local event, later than every earlier one.
    public mutating func tick(wallMillis: UInt64) -> HLCTimestamp {
        let wall = min(wallMillis, HLCTimestamp.maxMillis)
        if wall > last.millis {
            last = HLCTimestamp(millis: wall, counter: 0)
        } else {
            last = Self.successor(of: last)
        }
        return last
    }

    /// Merges a timestamp received from another node and returns one later than both it and
    /// every local timestamp so far. Refuses (and stays unchanged) when `remote` is too far ahead.
    public mutating func observe(_ remote: HLCTimestamp, wallMillis: UInt64) throws(Refusal) -> HLCTimestamp {
        if let refusal = refusal(of: remote, wallMillis: wallMillis) { throw refusal }
        let wall = min(wallMillis, HLCTimestamp.maxMillis)
        let newest = max(last, remote)
        if wall > newest.millis {
            last = HLCTimestamp(millis: wall, counter: 0)
        } else {
            last = Self.successor(of: newest)
        }
        return last
    }

    /// Why ``observe(_:wallMillis:)`` would refuse `remote` at `wallMillis`; nil when it would not.
    public func refusal(of remote: HLCTimestamp, wallMillis: UInt64) -> Refusal? {
        let wall = min(wallMillis, HLCTimestamp.maxMillis)
        guard remote.millis > wall, remote.millis - wall > maxForwardDriftMillis else { return nil }
        return .tooFarAhead(remote: remote, aheadMillis: remote.millis - wall, limitMillis: maxForwardDriftMillis)
    }

    /// The next value after `timestamp`: counter + 1, or the next millisecond when it overflows.
    private static func successor(of timestamp: HLCTimestamp) -> HLCTimestamp {
        if timestamp.counter == UInt16.max {
            return HLCTimestamp(millis: timestamp.millis + 1, counter: 0)
        }
        return HLCTimestamp(rawValue: timestamp.rawValue + 1)
    }
}
