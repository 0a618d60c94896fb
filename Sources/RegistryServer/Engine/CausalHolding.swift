import Dispatch
import RegistryCore
import RegistryWire

/// Holds a group of requests whose causal tokens name operations this node does not hold yet,
/// until it does (a peer's batch or snapshot brings them) or `--causal-timeout` passes; then the
/// group is submitted again (``ClientRequests/wakeCausalWaiters(_:)``). Past the deadline, or with
/// a timeout of 0, such a request is answered NOT_CAUGHT_UP instead, naming the nodes that hold
/// what it needs, and the rest of the group goes on. A token that names no valid log is refused
/// as the request's error.
struct CausalHolding: Sendable {
    let core: SharedCore
    let counters: ServerCounters
    /// How long a request waits for what its causal token names (`--causal-timeout`).
    let timeoutMillis: UInt64
    /// The clock of the deadlines, in milliseconds: monotonic (``SystemClock/monotonicMillis()``),
    /// as the timer that checks them is. Read from the wall clock, a deadline the clock stepped
    /// back past was not due when its timer fired, and nothing checked it again.
    let deadlineClock: @Sendable () -> UInt64

    /// Holds the group and returns true when a request's token names what is not held yet;
    /// `expire` is called once its deadline (`deadline`, or the timeout from now) has passed.
    /// Otherwise changes the requests whose tokens cannot be met into refusals, and returns false.
    func hold(
        _ frames: [ClientFrame], prepared: inout [NodeState.Prepared], access: ConnectionAccess, deliver: @escaping RegistryEngine.Delivery,
        deadline: UInt64?, expire: @escaping @Sendable () -> Void
    ) -> Bool {
        var required = [(heard: VersionVector, unheard: [LogPosition])?](repeating: nil, count: frames.count)
        for index in frames.indices where !frames[index].after.isEmpty {
            if case .refused = prepared[index] { continue }
            let after = frames[index].after
            guard after.positions.count <= CausalToken.maxPositions else {
                prepared[index] = .refused(
                    WireError(
                        code: .invalidArgument,
                        message: "the causal token names \(after.positions.count) logs, more than \(CausalToken.maxPositions)"))
                continue
            }
            do {
                required[index] = try VersionVector.fromClient(after.positions)
            } catch {
                prepared[index] = .refused(WireError(code: .invalidArgument, message: "the causal token: \(error.message)"))
            }
        }
        let now = deadlineClock()
        let deadline = deadline ?? now + timeoutMillis
        var refusals = [(Int, WireError)]()
        let parked = core.withLockedValue { core -> Bool in
            let held = core.node.versionVector
            var unmet = [(index: Int, shortfall: [VersionVector.Shortage], unheard: [LogPosition])]()
            var needed = VersionVector()
            for index in frames.indices {
                guard let required = required[index] else { continue }
                let shortfall = held.shortfall(against: required.heard)
                guard !shortfall.isEmpty || !required.unheard.isEmpty else { continue }
                unmet.append((index, shortfall, required.unheard))
                for entry in shortfall { needed.recordAll(through: max(entry.needed, needed[entry.log]), in: entry.log) }
                // A log of a node this one has not heard of is waited for until the deadline,
                // when the group comes back here and its tokens are read again.
                if !required.unheard.isEmpty { needed.recordAll(through: 1, in: VersionVector.unheardLog) }
            }
            if unmet.isEmpty { return false }
            if now < deadline {
                core.causalWaits.park(Self.waiter(frames, prepared: prepared, access: access, deliver: deliver), until: needed, deadlineMillis: deadline)
                return true
            }
            let members = core.node.registry.clusterMembers
            for (index, shortfall, unheard) in unmet {
                refusals.append((index, Self.notCaughtUp(shortfall, unheard: unheard, members: members, waited: timeoutMillis)))
            }
            return false
        }
        if parked {
            counters.causalWaits.increment()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(deadline - now) + 1), execute: expire)
            return true
        }
        for (index, error) in refusals { prepared[index] = .refused(error) }
        return false
    }

    /// The group as it is held: each frame already refused kept as its refusal, its body dropped.
    static func waiter(
        _ frames: [ClientFrame], prepared: [NodeState.Prepared], access: ConnectionAccess, deliver: @escaping RegistryEngine.Delivery
    ) -> RegistryEngine.CausalWaiter {
        var kept = frames
        var refusals = [(index: Int, error: WireError)]()
        for index in frames.indices {
            guard case .refused(let error) = prepared[index] else { continue }
            refusals.append((index, error))
            kept[index] = ClientFrame(requestID: frames[index].requestID, body: .unknown)
        }
        return RegistryEngine.CausalWaiter(frames: kept, refusals: refusals, access: access, deliver: deliver)
    }

    /// The held groups whose deadline passed, taken out to be submitted again.
    func expired() -> [CausalWaits<RegistryEngine.CausalWaiter>.Released] {
        core.withLockedValue { $0.causalWaits.expired(nowMillis: deadlineClock()) }
    }

    /// NOT_CAUGHT_UP for what `shortfall` lacks, and the logs `unheard` of nodes this one has
    /// not heard of: each log's origin, where it is reached, and how far this node is behind in it.
    static func notCaughtUp(
        _ shortfall: [VersionVector.Shortage], unheard: [LogPosition] = [], members: [NodeID: Member], waited: UInt64
    ) -> WireError {
        let logs =
            shortfall.map { entry -> String in
                let address = members[entry.log.origin].map { $0.address.isEmpty ? "" : " at \($0.address)" } ?? ""
                return "\(entry.log.origin)\(address) holds its log \(entry.log.epoch) through \(entry.needed), this node through \(entry.held)"
            }
            + unheard.map { "\($0.origin) holds its log \($0.epoch) through \($0.sequence), this node through 0" }
        return WireError(
            code: .notCaughtUp,
            message: "this node does not hold what the causal token names after \(waited) ms: \(logs.joined(separator: "; ")); retry later, or on that node",
            retryable: true)
    }
}
