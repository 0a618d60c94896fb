import RegistryCore
import Testing
@testable import RegistryServer

/// Forwarding (docs/cluster.md, "Forwarding") in whole simulated clusters: with every link up, a
/// link sends only its own node's logs, however long the writes go on; with one link cut, the
/// nodes on either side still get each other's writes, through the third.
@Suite struct ForwardingSimulationTests {
    /// Writes on every node, 20 ms apart, for 8 s of simulated time (longer than both forwarding
    /// waits, 300 ms and 3 s here): receivers always lack the newest operations, and every one
    /// still crosses each link once, from its origin.
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
        for _ in 0..<150 {
            simulation.randomRegistration(at: 0)
            simulation.randomRegistration(at: 2)
            simulation.advance(by: 20)
        }
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
}
