import Foundation
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing

/// A watch against a node that accepts connections and never answers (stopped, say).
@Suite(.timeLimit(.minutes(5))) struct WatchHelloTimeoutTests {
    /// Each attempt gives up once its connect timeout passes without the hello's answer, so the
    /// watch moves on and, out of attempts, throws: it waited for the answer for ever, and never
    /// reached its other endpoints.
    /// Over TLS too: the hello waits for a handshake that the node never answers.
    @Test(arguments: [false, true]) func aNodeThatNeverAnswersTheHelloIsGivenUp(tls: Bool) async throws {
        let (listener, port) = try #require(listeningLoopbackSocket())
        defer { close(listener) }
        let watch = RegistryWatch(
            endpoints: [try Endpoint(parsing: "127.0.0.1:\(port)")], clientName: "t", tls: tls ? try ClientTLS() : nil, retryDelay: .milliseconds(10),
            maxAttempts: 2, connectTimeout: .milliseconds(300))
        // The watch runs on a task of its own, which a watch stuck in the hello would never let
        // end: the test waits for its outcome at most 20 s of its own turns, and then fails
        // without it.
        let outcome = Mutex<String?>(nil)
        Task.detached {
            do {
                for try await _ in watch {}
                outcome.withLock { $0 = "ended" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
        }
        _ = try await poll(upTo: .seconds(20)) { outcome.withLock { $0 } != nil }
        let error = try #require(outcome.withLock { $0 }, "the watch still waited for the hello's answer after 20 s")
        #expect(error.contains("before the hello was answered"), "\(error)")
    }
}
