import Foundation
import LoadGeneration
import RegistryClient
import Synchronization

/// `--watchers N`: watch streams that follow the change feed while the load runs, spread across
/// the endpoints, each recording how long every event took from its operation's clock to it.
final class FeedWatchers: Sendable {
    private struct Seen {
        var lag = LatencyRecorder()
        var failures: [String] = []
        /// Watchers that have their first cursor (they follow from there).
        var ready = 0
    }

    private let seen = Mutex(Seen())
    private let tasks: Mutex<[Task<Void, Never>]> = Mutex([])
    let count: Int
    /// Events of operations stamped before this (wall milliseconds) are not counted: the warm-up.
    private let countFrom: Mutex<UInt64> = Mutex(.max)

    /// Starts `count` watchers of every vendor, the i-th on endpoint i mod endpoints, and returns
    /// once each has its first cursor (or gave up).
    init(count: Int, endpoints: [Endpoint], token: String?, tls: ClientTLS?) async {
        self.count = count
        var started = [Task<Void, Never>]()
        for index in 0..<count {
            let watch = RegistryWatch(
                endpoints: [endpoints[index % endpoints.count]], clientName: "registryload-watch-\(index)", token: token, tls: tls,
                maxAttempts: 5)
            started.append(
                Task { [self] in
                    var first = true
                    do {
                        for try await update in watch {
                            let now = UInt64(Date().timeIntervalSince1970 * 1_000_000)
                            let from = countFrom.withLock { $0 }
                            seen.withLock { seen in
                                if first { seen.ready += 1 }
                                // An operation's clock has millisecond resolution: the events of a
                                // run with one millisecond are recorded at once.
                                var run: (millis: UInt64, count: Int)?
                                for event in update.events where event.millis >= from {
                                    if let open = run, open.millis == event.millis {
                                        run = (open.millis, open.count + 1)
                                        continue
                                    }
                                    if let open = run { seen.lag.record(Self.lag(now, open.millis), count: open.count) }
                                    run = (event.millis, 1)
                                }
                                if let open = run { seen.lag.record(Self.lag(now, open.millis), count: open.count) }
                            }
                            first = false
                        }
                    } catch is CancellationError {
                    } catch {
                        seen.withLock { $0.failures.append("\(error)") }
                    }
                })
        }
        tasks.withLock { $0 = started }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, seen.withLock({ $0.ready + $0.failures.count }) < count {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Nanoseconds from an operation's clock (`millis`) to its delivery (`now`, microseconds).
    private static func lag(_ now: UInt64, _ millis: UInt64) -> UInt64 {
        now > millis * 1_000 ? (now - millis * 1_000) * 1_000 : 0
    }

    /// Counts events of operations stamped from now on.
    func startCounting() {
        countFrom.withLock { $0 = UInt64(Date().timeIntervalSince1970 * 1_000) }
    }

    /// Lets the watchers catch up for `grace`, stops them, and reports.
    func finish(grace: Duration = .seconds(1)) async -> LoadReport.Feed {
        try? await Task.sleep(for: grace)
        for task in tasks.withLock({ $0 }) { task.cancel() }
        for task in tasks.withLock({ $0 }) { await task.value }
        return seen.withLock { LoadReport.Feed(watchers: count, events: $0.lag.count, lag: $0.lag.summary, failures: $0.failures) }
    }
}
