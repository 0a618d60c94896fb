import Foundation
import Logging
import NIOPosix
import RegistryCore
import RegistryTestSupport
import Testing
@testable import RegistryServer

/// A peer link keeps its timeouts on the monotonic clock, whatever the node's wall clock does.
@Suite(.timeLimit(.minutes(5))) struct PeerLinkClockTests {
    /// A peer that accepts the connection and never answers the hello, while the node's wall
    /// clock runs backwards (a second back at each reading, as after an NTP step back that
    /// keeps coming): the link still gives the peer up once its answer timeout passes. Timed by
    /// the wall clock, it waited until the wall clock came back past the moment it connected.
    @Test func aSilentPeerIsGivenUpWhileTheWallClockStepsBack() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = temp.path
        configuration.nodeID = try NodeID("node-a")
        let engine = try RegistryEngine(
            configuration: configuration, logger: .quiet(), wallClock: steppingBackClock(from: 1_800_000_000_000, by: 1_000))
        defer { engine.close() }
        let (listener, port) = try #require(listeningLoopbackSocket())
        defer { close(listener) }
        let link = PeerLink(
            address: PeerAddress(host: "127.0.0.1", port: port), configured: true, engine: engine, group: MultiThreadedEventLoopGroup.singleton, logger: .quiet(),
            answerTimeoutMillis: 300)
        link.start()
        defer { link.shutdown() }
        let gaveUp = try await poll(upTo: .seconds(20)) { link.status.lastError.contains("did not answer within 300 ms") }
        #expect(gaveUp, "\(link.status)")
    }
}
