import NIOCore
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// A client connected with an `answerTimeout` gives the connection up when a call waits longer:
/// here a node holds the call for a causal token naming an operation it never received (up to
/// its `--causal-timeout`, 10 s here), and the client gives up after 300 ms.
@Suite(.timeLimit(.minutes(1))) struct ClientAnswerTimeoutTests {
    @Test func aCallUnansweredPastTheAnswerTimeoutGivesTheConnectionUp() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path) { $0.causalTimeoutMillis = 10_000 }
        let client = try await RegistryClient.connect(to: node.endpoint, clientName: "t", answerTimeout: .milliseconds(300))
        let answered = try await client.send(.stats)
        guard case .stats = answered else {
            Issue.record("expected the stats, got \(answered)")
            return
        }
        let own = try await client.stats()
        // An operation of this node's log far past what it wrote.
        let ahead = CausalToken(positions: [LogPosition(origin: own.nodeID, epoch: own.logEpoch, sequence: 1_000_000)])
        // Given up by the client's timer: the node's own answer, at its causal timeout, is an
        // error answer that `reply` returns rather than throws.
        do {
            let reply = try await client.reply(.stats, after: ahead)
            Issue.record("expected the call to be given up, got \(reply.body)")
        } catch {
            guard case .connectionClosed(let reason) = error else {
                Issue.record("expected connectionClosed, got \(error)")
                return
            }
            #expect(reason.contains("answerTimeout"), "\(reason)")
        }
        await client.close()
        try await node.stop()
    }
}
