import CProtobufC
import CRegistryProto
import NIOCore

/// `registry.v1.CausalToken`: the operations an answer reflects, as one position per log of the
/// cluster. A request that carries a token (``ClientFrame/after``) is answered only by a node that
/// holds every operation it names, so an answer never forgets what an earlier answer showed, on
/// whichever node (read your writes across nodes).
///
/// A value: positions are kept sorted by (origin, epoch), one per log, none at sequence 0, so
/// that equal tokens compare equal. Apps treat it as opaque ``bytes``.
public struct CausalToken: Hashable, Sendable, CustomStringConvertible {
    /// Sorted by (origin, epoch); one per log; every sequence above 0.
    public private(set) var positions: [LogPosition]

    /// The most positions a token may name (ClientFrame.after beyond it is INVALID_ARGUMENT):
    /// logs every member holds are left out of a token, so a real one names a few.
    public static let maxPositions = 256

    /// The token that requires nothing.
    public static let empty = CausalToken()

    public init() {
        positions = []
    }

    /// A token naming `positions`, normalised: two of one log keep the higher sequence, and
    /// positions at sequence 0 (which require nothing) are dropped.
    public init(positions: [LogPosition]) {
        self.positions = Self.normalised(positions)
    }

    public var isEmpty: Bool { positions.isEmpty }

    /// The token that requires everything either requires: for each log, the higher sequence.
    public func merging(_ other: CausalToken) -> CausalToken {
        if other.positions.isEmpty || other == self { return self }
        if positions.isEmpty { return other }
        var merged = CausalToken()
        merged.positions.reserveCapacity(positions.count + other.positions.count)
        var (i, j) = (0, 0)
        while i < positions.count || j < other.positions.count {
            if j == other.positions.count || (i < positions.count && Self.precedes(positions[i], other.positions[j])) {
                merged.positions.append(positions[i])
                i += 1
            } else if i == positions.count || Self.precedes(other.positions[j], positions[i]) {
                merged.positions.append(other.positions[j])
                j += 1
            } else {
                var position = positions[i]
                position.sequence = max(position.sequence, other.positions[j].sequence)
                merged.positions.append(position)
                i += 1
                j += 1
            }
        }
        return merged
    }

    public mutating func merge(_ other: CausalToken) {
        self = merging(other)
    }

    /// This token without the logs that `answer` shows every member holds: an answer to a
    /// request that carried `sent` came from a node that held all of `sent`, and its token
    /// (non-empty: the node has peers) leaves out only the logs every member holds as far as that
    /// node does. So each log of `sent` that `answer` leaves out is held everywhere up to `sent`'s
    /// position, and is dropped here unless this token names more of it.
    public func pruned(bySent sent: CausalToken, answer: CausalToken) -> CausalToken {
        guard !answer.isEmpty, !sent.isEmpty, !positions.isEmpty else { return self }
        func key(_ position: LogPosition) -> LogKey { LogKey(origin: position.origin, epoch: position.epoch) }
        let named = Set(answer.positions.map(key))
        var stable = [LogKey: UInt64]()
        for position in sent.positions where !named.contains(key(position)) { stable[key(position)] = position.sequence }
        guard !stable.isEmpty else { return self }
        var pruned = self
        pruned.positions.removeAll { position in stable[key(position)].map { position.sequence <= $0 } ?? false }
        return pruned
    }

    /// A log, as positions name it.
    private struct LogKey: Hashable {
        let origin: String
        let epoch: UInt64
    }

    public var description: String {
        positions.isEmpty ? "(empty)" : positions.map { "\($0.origin)/\($0.epoch): \($0.sequence)" }.joined(separator: ", ")
    }

    /// Whether `a`'s log sorts before `b`'s.
    private static func precedes(_ a: LogPosition, _ b: LogPosition) -> Bool {
        a.origin != b.origin ? a.origin < b.origin : a.epoch < b.epoch
    }

    private static func normalised(_ positions: [LogPosition]) -> [LogPosition] {
        let sorted = positions.filter { $0.sequence > 0 }.sorted {
            precedes($0, $1) || (!precedes($1, $0) && $0.sequence > $1.sequence)
        }
        var result = [LogPosition]()
        result.reserveCapacity(sorted.count)
        for position in sorted {
            // The first of each log is its highest sequence.
            if let last = result.last, last.origin == position.origin, last.epoch == position.epoch { continue }
            result.append(position)
        }
        return result
    }

    // MARK: - Bytes, for an app to keep

    /// The token as the protobuf encoding of `registry.v1.CausalToken`: what an app keeps (for
    /// example beside the keychain UUID) and gives back to ``init(bytes:)``.
    public var bytes: [UInt8] {
        let arena = CArena()
        var message = Registry__V1__CausalToken()
        registry__v1__causal_token__init(&message)
        (message.n_positions, message.positions) = arena.positions(positions)
        var buffer = ByteBuffer()
        // Packing a message built from valid strings cannot fail.
        try? withExtendedLifetime(arena) { () throws(CodecError) in try ProtobufC.pack(&message, into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    /// Reads what ``bytes`` gave. Throws ``CodecError/malformed(message:bytes:)`` for bytes that
    /// are not a CausalToken, and ``CodecError/invalidField(_:)`` for one naming more than
    /// ``maxPositions`` positions.
    public init(bytes: [UInt8]) throws(CodecError) {
        self = try ProtobufC.withUnpacked(ByteBuffer(bytes: bytes), name: "registry.v1.CausalToken", unpack: registry__v1__causal_token__unpack) {
            (message: Registry__V1__CausalToken) throws(CodecError) -> CausalToken in
            guard message.n_positions <= CausalToken.maxPositions else {
                throw .invalidField("a causal token names \(message.n_positions) positions, more than \(CausalToken.maxPositions)")
            }
            return try CRead.causalToken(message)
        }
    }
}

extension CArena {
    /// `token` as a message, or nil when it is empty (left out of the frame).
    func causalToken(_ token: CausalToken) -> UnsafeMutablePointer<Registry__V1__CausalToken>? {
        guard !token.isEmpty else { return nil }
        var message = Registry__V1__CausalToken()
        registry__v1__causal_token__init(&message)
        (message.n_positions, message.positions) = positions(token.positions)
        return new(message)
    }
}

extension CRead {
    static func causalToken(_ pointer: UnsafeMutablePointer<Registry__V1__CausalToken>?) throws(CodecError) -> CausalToken {
        guard let pointer else { return .empty }
        return try causalToken(pointer.pointee)
    }

    /// Any number of positions: the server refuses too many as a request's error, not the frame's.
    static func causalToken(_ message: Registry__V1__CausalToken) throws(CodecError) -> CausalToken {
        CausalToken(positions: try positions(message.n_positions, message.positions))
    }
}
