import Foundation
import RegistryClient
import RegistryTestSupport
import Synchronization
import Testing

/// A call whose task is cancelled returns at once with ``RegistryClientError/cancelled``: before,
/// a call waited on an event loop future that task cancellation does not reach, so a caller
/// could not put a deadline of its own on it (a task group racing a sleep waited for both).
@Suite(.timeLimit(.minutes(5))) struct ClientCancellationTests {
    /// Against a socket whose kernel accepts the connection and nothing ever answers: the
    /// hello's answer never comes.
    @Test func aCancelledConnectReturnsAtOnce() async throws {
        let (listener, port) = try #require(listeningLoopbackSocket())
        defer { close(listener) }
        let endpoint = try Endpoint(parsing: "127.0.0.1:\(port)")
        let outcome = Mutex<String?>(nil)
        let task = Task.detached {
            do {
                _ = try await RegistryClient.connect(to: endpoint, clientName: "t")
                outcome.withLock { $0 = "connected" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
        }
        // Connected, and waiting for the hello's answer.
        try await Task.sleep(for: .milliseconds(200))
        #expect(outcome.withLock { $0 } == nil, "nothing answers: the connect still waits")
        task.cancel()
        // Bounded: a connect that ignores the cancellation is seen waiting after 10 s of this
        // task's turns, and the test fails instead of hanging.
        _ = try await poll(upTo: .seconds(10)) { outcome.withLock { $0 } != nil }
        let error = try #require(outcome.withLock { $0 }, "the cancelled connect still waited after 10 s")
        #expect(error == "\(RegistryClientError.cancelled)")
    }
}
