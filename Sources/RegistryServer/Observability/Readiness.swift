import RegistryCore
import RegistryWire

/// Whether a node should take traffic (`/readyz`), decided from its stats alone. A node is
/// ready once its storage is open and its journal replayed (it has stats at all), and, when it
/// is a cluster member, once it is within ``maxBehindOperations`` of every peer it has heard
/// from. A member that has heard from no peer yet waits up to ``peerGraceSeconds`` after start
/// before it calls itself ready regardless, so that a survivor whose peers are all down still
/// serves.
enum Readiness: Equatable, Sendable {
    case ready
    case notReady(String)

    static let maxBehindOperations: UInt64 = 10_000
    static let peerGraceSeconds: UInt64 = 30

    static func evaluate(_ stats: StatsMessage?) -> Readiness {
        guard let stats else { return .notReady("opening storage and replaying the journal") }
        guard stats.writeRefusal.isEmpty else { return .notReady("refusing writes: \(stats.writeRefusal)") }
        let peers = stats.peers.filter { $0.state != "own-address" }
        guard !peers.isEmpty else { return .ready }
        let own = (try? VersionVector(positions: stats.versionVector)) ?? VersionVector()
        var heard = false
        for peer in peers where !peer.peerHolds.isEmpty {
            heard = true
            guard let theirs = try? VersionVector(positions: peer.peerHolds) else { continue }
            let behind = theirs.logs.reduce(UInt64(0)) { total, entry in total + (entry.sequence - min(entry.sequence, own[entry.log])) }
            if behind > maxBehindOperations {
                return .notReady("\(behind) operations behind \(peer.nodeID.isEmpty ? peer.address : peer.nodeID)")
            }
        }
        if !heard && stats.uptimeMillis < peerGraceSeconds * 1_000 {
            return .notReady("waiting to hear from a peer (at most \(peerGraceSeconds) s after start)")
        }
        return .ready
    }
}
