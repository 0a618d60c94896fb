import RegistryWire
import Testing
@testable import RegistryServer

@Suite struct MetricsEndpointTests {
    @Test func routesByMethodAndPath() {
        #expect(MetricsRoute(method: "GET", uri: "/metrics") == .metrics)
        #expect(MetricsRoute(method: "HEAD", uri: "/healthz") == .health)
        #expect(MetricsRoute(method: "GET", uri: "/readyz?verbose=1") == .readiness)
        #expect(MetricsRoute(method: "GET", uri: "/metrics/") == .rejected(status: 404, reason: "not_found"))
        #expect(MetricsRoute(method: "GET", uri: "") == .rejected(status: 404, reason: "not_found"))
        #expect(MetricsRoute(method: "POST", uri: "/metrics") == .rejected(status: 405, reason: "method_not_allowed"))
        #expect(MetricsRoute(method: "PUT", uri: "/nowhere") == .rejected(status: 405, reason: "method_not_allowed"))
    }

    @Test func helpLinesGoBeforeTheTypeLinesOfCatalogedFamilies() {
        let exposition = "# TYPE registry_requests_total counter\nregistry_requests_total 3\n# TYPE other_thing gauge\nother_thing 1\n"
        #expect(
            MetricCatalog.withHelp(exposition)
                == "# HELP registry_requests_total Client requests answered, errors included.\n"
                + "# TYPE registry_requests_total counter\nregistry_requests_total 3\n# TYPE other_thing gauge\nother_thing 1\n")
        #expect(Set(MetricCatalog.all.map(\.name)).count == MetricCatalog.all.count)
    }
}

@Suite struct ReadinessTests {
    func stats(uptimeSeconds: UInt64, own: UInt64, peers: [(state: String, holds: UInt64?)]) -> StatsMessage {
        var stats = StatsMessage()
        stats.uptimeMillis = uptimeSeconds * 1_000
        stats.versionVector = [LogPosition(origin: "node-a", epoch: 1, sequence: own)]
        stats.peers = peers.enumerated().map { index, peer in
            PeerLinkReport(
                address: "10.0.0.\(index):7400", nodeID: peer.holds == nil ? "" : "node-\(index)", state: peer.state, backlogOperations: 0,
                inFlightBatches: 0, lagMillis: 0,
                peerHolds: peer.holds.map { [LogPosition(origin: "node-a", epoch: 1, sequence: $0)] } ?? [], reconnects: 0, lastError: "",
                sentOperations: 0)
        }
        return stats
    }

    @Test func aNodeIsReadyOnceOpenAndWithinTheBoundOfEveryPeerItHeardFrom() {
        #expect(Readiness.evaluate(nil) == .notReady("opening storage and replaying the journal"))
        #expect(Readiness.evaluate(stats(uptimeSeconds: 0, own: 5, peers: [])) == .ready)
        #expect(Readiness.evaluate(stats(uptimeSeconds: 1, own: 5, peers: [("own-address", nil)])) == .ready)
        // Behind a peer by more than the bound, then by the bound exactly.
        let bound = Readiness.maxBehindOperations
        #expect(Readiness.evaluate(stats(uptimeSeconds: 99, own: 5, peers: [("streaming", 6 + bound)])) == .notReady("\(bound + 1) operations behind node-0"))
        #expect(Readiness.evaluate(stats(uptimeSeconds: 99, own: 5, peers: [("streaming", 5 + bound), ("disconnected", nil)])) == .ready)
        // Ahead of a peer is fine.
        #expect(Readiness.evaluate(stats(uptimeSeconds: 99, own: 50, peers: [("streaming", 5)])) == .ready)
    }

    /// A node that refuses writes (its clock ran ahead, or it was removed) takes no traffic.
    @Test func aNodeThatRefusesWritesIsNotReady() {
        var refusing = stats(uptimeSeconds: 99, own: 5, peers: [])
        refusing.writeRefusal = "this node was removed from the cluster"
        #expect(Readiness.evaluate(refusing) == .notReady("refusing writes: this node was removed from the cluster"))
    }

    @Test func aMemberThatHeardFromNoPeerWaitsOnlyTheGracePeriod() {
        let grace = Readiness.peerGraceSeconds
        guard case .notReady = Readiness.evaluate(stats(uptimeSeconds: grace - 1, own: 0, peers: [("connecting", nil)])) else {
            return #expect(Bool(false))
        }
        #expect(Readiness.evaluate(stats(uptimeSeconds: grace, own: 0, peers: [("connecting", nil)])) == .ready)
    }
}
