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
@Suite(.timeLimit(.minutes(5))) struct ClientAnswerTimeoutTests {
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

    /// A caller that stops waiting first (its own deadline, here a cancelled task) leaves the
    /// call watched: the connection is still given up once the node has not answered within the
    /// answer timeout, and the calls after it are not left waiting behind a node that stopped.
    @Test func aCancelledCallStillGivesTheConnectionUpPastTheAnswerTimeout() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try await TestNode.start(dataDirectory: temp.path) { $0.causalTimeoutMillis = 10_000 }
        let client = try await RegistryClient.connect(to: node.endpoint, clientName: "t", answerTimeout: .seconds(2))
        let own = try await client.stats()
        let ahead = CausalToken(positions: [LogPosition(origin: own.nodeID, epoch: own.logEpoch, sequence: 1_000_000)])
        let held = Task { try await client.reply(.stats, after: ahead) }
        try await Task.sleep(for: .milliseconds(50))
        held.cancel()
        do {
            let reply = try await held.value
            Issue.record("expected the call to stop waiting, got \(reply.body)")
        } catch RegistryClientError.cancelled {
        } catch RegistryClientError.connectionClosed(let reason) where reason.contains("answerTimeout") {
            // A starved test task cancelled the call only after the timeout had given it up.
        } catch {
            Issue.record("expected the call cancelled, got \(error)")
        }
        // The node holds the call; past the answer timeout the client gives the connection up.
        var outcome: Result<StatsMessage, RegistryClientError>?
        for _ in 0..<100 {
            outcome = await Self.stats(client)
            if case .failure = outcome { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        guard case .failure(.connectionClosed(let reason)) = outcome else {
            Issue.record("expected the connection given up, got \(String(describing: outcome))")
            return
        }
        #expect(reason.contains("answerTimeout"), "\(reason)")
        await client.close()
        try await node.stop()
    }

    static func stats(_ client: RegistryClient) async -> Result<StatsMessage, RegistryClientError> {
        do {
            return .success(try await client.stats())
        } catch {
            return .failure(error)
        }
    }
}
