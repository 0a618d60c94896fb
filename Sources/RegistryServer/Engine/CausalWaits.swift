import RegistryCore
import RegistryWire

/// Requests held because their causal token (``ClientFrame/after``) names operations this node
/// does not hold yet: each waits until the node's version vector covers what it requires, or
/// until its deadline, whichever comes first. A plain value with no clock and no I/O: the engine
/// keeps it under its lock, so that checking a token and parking its request happen in one step
/// with respect to the peer batches that could satisfy it.
struct CausalWaits<Payload> {
    fileprivate struct Parked {
        let required: VersionVector
        let deadlineMillis: UInt64
        let payload: Payload
    }

    /// A request let go, with the deadline it was parked with (a request submitted again keeps it).
    typealias Released = (payload: Payload, deadlineMillis: UInt64)

    private var parked: [Parked] = []

    var isEmpty: Bool { parked.isEmpty }

    /// Holds `payload` until a vector covers `required`, or until `deadlineMillis`.
    mutating func park(_ payload: Payload, until required: VersionVector, deadlineMillis: UInt64) {
        parked.append(Parked(required: required, deadlineMillis: deadlineMillis, payload: payload))
    }

    /// Takes out, in the order they were parked, every request whose requirement `held` covers.
    mutating func covered(by held: VersionVector) -> [Released] {
        take { held.shortfall(against: $0.required).isEmpty }
    }

    /// Takes out, in the order they were parked, every request whose deadline is at or before
    /// `nowMillis`.
    mutating func expired(nowMillis: UInt64) -> [Released] {
        take { $0.deadlineMillis <= nowMillis }
    }

    private mutating func take(where chosen: (Parked) -> Bool) -> [Released] {
        var taken = [Released]()
        var kept = [Parked]()
        for entry in parked {
            if chosen(entry) { taken.append((entry.payload, entry.deadlineMillis)) } else { kept.append(entry) }
        }
        if !taken.isEmpty { parked = kept }
        return taken
    }
}

extension VersionVector {
    /// A log of which a requirement names more than a vector holds.
    typealias Shortage = (log: LogID, needed: UInt64, held: UInt64)

    /// The logs of which `required` names more than this vector holds, in log order: what a
    /// node must still receive before it may answer a request carrying `required`.
    func shortfall(against required: VersionVector) -> [Shortage] {
        required.logs.compactMap { entry in
            self[entry.log] >= entry.sequence ? nil : (entry.log, entry.sequence, self[entry.log])
        }
    }

    /// This vector as the token of an answer, leaving out what every member holds (`floor`, per
    /// log): those positions would hold on any node, and a token that named every epoch of every
    /// start would grow without end. A nil floor means the node has no peers, so the token is
    /// empty.
    func causalToken(above floor: [LogID: UInt64]?) -> CausalToken {
        guard let floor else { return .empty }
        var positions = [LogPosition]()
        for (log, sequence) in logs where sequence > floor[log] ?? 0 {
            positions.append(LogPosition(origin: log.origin.value, epoch: log.epoch, sequence: sequence))
        }
        return CausalToken(positions: positions)
    }
}

extension CausalWaits: Sendable where Payload: Sendable {}
extension CausalWaits.Parked: Sendable where Payload: Sendable {}
