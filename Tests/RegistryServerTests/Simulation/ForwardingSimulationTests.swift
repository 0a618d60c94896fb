import RegistryCore
import Testing
@testable import RegistryServer

/// Forwarding (docs/cluster.md, "Forwarding") in whole simulated clusters: with every link up, a
/// link sends only its own node's logs, however long the writes go on; with one link cut, the
/// nodes on either side still get each other's writes, through the third, which stops once the
/// link is back, even slower than the way through the third.
@Suite struct ForwardingSimulationTests {
    /// Writes on every node, 20 ms apart, for 8 s of simulated time (the forwarding delay is
    /// 300 ms here): every operation crosses each link once, from its origin.
    @Test func underSteadyWritesNoLinkForwards() throws {
        let simulation = try ClusterSimulation(seed: 7)
        for _ in 0..<400 {
            simulation.randomRegistration()
            simulation.advance(by: 20)
        }
        try ClusterSimulationTests.quiesce(simulation, faults: .none)
        #expect(simulation.counts.registrations > 350)
        #expect(simulation.counts.forwardedOperations == 0)
        try ClusterSimulationTests.check(simulation)
    }

    /// The link between nodes 0 and 2 is cut while both take writes: each gets the other's
    /// through node 1, and the cluster goes quiet with the link still cut.
    @Test func nodesOnEitherSideOfACutLinkGetEachOthersWritesThroughTheThird() throws {
        let simulation = try ClusterSimulation(seed: 11)
        simulation.advance(by: 100)
        simulation.cutLink(0, 2)
        writeOnNodes0And2(simulation, steps: 150)
        var steps = 0
        while !simulation.isQuiet, steps < 1_000 {
            simulation.advance(by: 20)
            steps += 1
        }
        #expect(simulation.isQuiet, "not quiet 20 s on, across the cut link: \(simulation.linkReport)")
        #expect(simulation.counts.registrations >= 290)
        #expect(simulation.counts.forwardedOperations >= simulation.counts.registrations)
        try ClusterSimulationTests.check(simulation)
    }

    /// Once the cut link is back (and its links have reconnected, within the simulation's 1 s
    /// backoff), the nodes on either side get each other's writes from their origin again, and
    /// the third node stops forwarding them while the writes go on: also when the link comes back
    /// slower than the path through the third node (150 ms more each way, where that path takes
    /// two or three 20 ms steps), as the third forwards only what it has held for the forwarding
    /// delay.
    @Test(arguments: [UInt64(0), 150])
    func forwardingStopsOnceTheCutLinkIsBack(extraMillis: UInt64) throws {
        let simulation = try ClusterSimulation(seed: 13)
        simulation.advance(by: 100)
        simulation.cutLink(0, 2)
        simulation.slowLink(from: 0, to: 2, byMillis: extraMillis)
        simulation.slowLink(from: 2, to: 0, byMillis: extraMillis)
        writeOnNodes0And2(simulation, steps: 100)
        #expect(simulation.counts.forwardedOperations > 0)
        simulation.healAll()
        writeOnNodes0And2(simulation, steps: 100)
        let settled = simulation.counts.forwardedOperations
        writeOnNodes0And2(simulation, steps: 200)
        #expect(simulation.counts.forwardedOperations == settled, "forwarded \(simulation.counts.forwardedOperations - settled) more in the 4 s after")
        try ClusterSimulationTests.quiesce(simulation, faults: .none)
        try ClusterSimulationTests.check(simulation)
    }

    /// A registration on node 0 and one on node 2 every 20 ms, `steps` times.
    func writeOnNodes0And2(_ simulation: ClusterSimulation, steps: Int) {
        for _ in 0..<steps {
            simulation.randomRegistration(at: 0)
            simulation.randomRegistration(at: 2)
            simulation.advance(by: 20)
        }
    }
}
