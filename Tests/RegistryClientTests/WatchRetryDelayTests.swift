import RegistryClient
import Testing

/// A watch waits longer after each round of its endpoints that failed, up to its longest delay:
/// at a fixed 200 ms, `registryctl watch` (3 attempts) gave up 0.4 s into a node's restart.
@Suite struct WatchRetryDelayTests {
    @Test func theDelayDoublesEachRoundOfTheEndpointsUpToTheLongest() throws {
        let one = RegistryWatch(endpoints: [try Endpoint(parsing: "127.0.0.1:1")], clientName: "t")
        #expect((1...8).map { one.delay(afterFailures: $0) } == [200, 400, 800, 1_600, 2_000, 2_000, 2_000, 2_000].map { Duration.milliseconds($0) })
        // Every endpoint is tried at a delay before it grows.
        let three = RegistryWatch(
            endpoints: try ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"].map { try Endpoint(parsing: $0) }, clientName: "t",
            retryDelay: .milliseconds(100), maxRetryDelay: .seconds(1))
        #expect((1...9).map { three.delay(afterFailures: $0) } == [100, 100, 100, 200, 200, 200, 400, 400, 400].map { Duration.milliseconds($0) })
        #expect(three.delay(afterFailures: 1_000) == .seconds(1), "no overflow, however many failures")
    }
}
