import NIOCore
import NIOPosix
import RegistryCore

/// What a watch yields: the events of one batch, in the serving node's apply order, and the
/// cursor after them, to keep and resume from. A batch without events is progress: nothing
/// matched for a while, and the cursor moved on.
public struct WatchUpdate: Hashable, Sendable {
    public let events: [WatchEventMessage]
    public let cursor: WatchCursor

    public var isProgress: Bool { events.isEmpty }
}

/// The registry's change feed as an `AsyncSequence` (`docs/cluster.md`, "Watching changes").
///
/// It watches on a connection of its own to the first of `endpoints`, and when the connection
/// ends or the node refuses with a retryable error (not caught up, too many watchers), it goes on
/// from the last cursor on the next endpoint, after `retryDelay`, doubled after each round of
/// the endpoints that failed, up to `maxRetryDelay` (``delay(afterFailures:)``). Delivery is at least once: an
/// operation's events may come again after a reconnect, perhaps saying something else (each
/// states the new node's view); apply every event in order. A batch is yielded only once its
/// cursor has arrived, whole, so the events
/// of a batch that a connection cut short come again from the next node. Resumed on a node other
/// than the one its cursor came from, the first batch may be large: the node sends no cursor
/// until it is past the events it applied before it held the whole cursor (after a partition,
/// up to its `--watch-history`), and the watch holds them in memory until then. It ends with an error
/// for what retrying cannot mend: `cursor_expired` (read the state again, and watch from now),
/// a refused token or filter, or `maxAttempts` failed attempts in a row (a TLS failure counts
/// as a failed attempt: another endpoint may present a certificate this client trusts).
///
/// ```swift
/// for try await update in RegistryWatch(endpoints: nodes, vendors: ["com.vendor"], clientName: "billing") {
///     for event in update.events { apply(event) }
///     save(update.cursor)
/// }
/// ```
public struct RegistryWatch: AsyncSequence, Sendable {
    public typealias Element = WatchUpdate

    public let endpoints: [Endpoint]
    /// The filters, and the cursor to start after (nil: from now).
    public let request: WatchRequestMessage
    public let clientName: String
    public let token: String?
    public let tls: ClientTLS?
    public let retryDelay: Duration
    /// The longest wait between two attempts.
    public let maxRetryDelay: Duration
    /// Failed connections or retryable refusals in a row before the watch throws.
    public let maxAttempts: Int
    /// How long one connection attempt may take: connecting, and then the node's answer to the
    /// hello (a node that accepts and never answers is given up, and the next endpoint tried).
    public let connectTimeout: Duration
    /// How long a connection may send nothing while the watch waits for its next batch: a node
    /// sends progress every `--watch-progress` (a second by default) when nothing matches, so a
    /// silent one has stopped, or its network has; the watch goes on from its cursor on the next
    /// endpoint. A node that says in its hello that it sends progress more seldom (a node since
    /// the field exists) is given three of its intervals instead.
    public let idleTimeout: Duration
    private let group: any EventLoopGroup

    /// The wait after `failures` failed attempts in a row (1 or more): `retryDelay` through the
    /// first round of the endpoints, twice that through the next, and so on up to
    /// `maxRetryDelay`. Every endpoint is tried once at each delay before it grows, so a node
    /// that restarts is waited for without holding back a move to another that is up.
    public func delay(afterFailures failures: Int) -> Duration {
        let rounds = Swift.min(Swift.max(failures - 1, 0) / endpoints.count, 20)
        return Swift.min(retryDelay * (1 << rounds), maxRetryDelay)
    }

    public init(
        endpoints: [Endpoint], vendors: [String] = [], kinds: [WatchEventKind] = [], from cursor: WatchCursor? = nil, clientName: String,
        token: String? = nil, tls: ClientTLS? = nil, retryDelay: Duration = .milliseconds(200), maxRetryDelay: Duration = .seconds(2),
        maxAttempts: Int = 50,
        connectTimeout: Duration = .seconds(5), idleTimeout: Duration = .seconds(30),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        precondition(idleTimeout > .zero, "a watch's idle timeout must be above zero")
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        precondition(!endpoints.isEmpty, "a watch needs at least one endpoint")
        self.endpoints = endpoints
        request = WatchRequestMessage(vendors: vendors, kinds: kinds.map(\.rawValue), cursor: cursor)
        self.clientName = clientName
        self.token = token
        self.tls = tls
        self.retryDelay = retryDelay
        self.maxRetryDelay = Swift.max(maxRetryDelay, retryDelay)
        self.maxAttempts = maxAttempts
        self.group = group
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(watch: self)
    }

    /// Follows the feed from node to node; see ``RegistryWatch``.
    public final class Iterator: AsyncIteratorProtocol {
        private let watch: RegistryWatch
        /// The cursor of the last batch yielded: where a new connection resumes.
        public private(set) var cursor: WatchCursor?
        /// The node being watched, and the endpoint it was reached at.
        public private(set) var server: HelloAccepted?
        private var connection: WatchConnection?
        /// Frames taken from the connection and not yet handled, the next one last.
        private var frames: [ServerFrame] = []
        private var pending: [WatchEventMessage] = []
        private var endpoint = 0
        private var failures = 0

        init(watch: RegistryWatch) {
            self.watch = watch
            cursor = watch.request.cursor
        }

        deinit {
            connection?.close()
        }

        public func next() async throws -> WatchUpdate? {
            while true {
                // A cancelled task gives the node its watcher's place back, frames held or not.
                if Task.isCancelled {
                    drop()
                    throw CancellationError()
                }
                if connection == nil {
                    try await connect()
                    // A failed attempt moved on to the next endpoint already.
                    if connection == nil { continue }
                }
                if frames.isEmpty {
                    let taken: [ServerFrame]?
                    do {
                        // A cancelled task closes the connection: the node gives the watcher's place back.
                        let connection = self.connection
                        taken = try await withTaskCancellationHandler {
                            try await connection?.nextFrames()
                        } onCancel: {
                            connection?.close()
                        }
                        try Task.checkCancellation()
                    } catch is CancellationError {
                        drop()
                        throw CancellationError()
                    } catch {
                        // Out of attempts, the watch says why the last connection ended.
                        try await retry(after: error as? RegistryClientError ?? .connectionClosed("\(error)"))
                        continue
                    }
                    guard let taken else {
                        try await retry()
                        continue
                    }
                    frames = taken.reversed()
                }
                let frame = frames.removeLast()
                switch frame.body {
                case .watchEvents(let batch):
                    guard let next = batch.cursor else {
                        pending += batch.events
                        continue
                    }
                    // Progress is a cursor: a node that sends part of a span and then drops the
                    // connection, again and again, counts as failing.
                    failures = 0
                    cursor = next
                    // Most frames end with a cursor: their events go out as they came.
                    let events = pending.isEmpty ? batch.events : pending + batch.events
                    pending = []
                    return WatchUpdate(events: events, cursor: next)
                case .error(let error) where error.retryable:
                    try await retry(after: RegistryClientError.server(error))
                case .error(let error):
                    drop()
                    throw RegistryClientError.server(error)
                default:
                    drop()
                    throw RegistryClientError.unexpectedResponse("\(frame.body) in a watch stream")
                }
            }
        }

        private func connect() async throws {
            let target = watch.endpoints[endpoint % watch.endpoints.count]
            var request = watch.request
            request.cursor = cursor
            do {
                let (connection, accepted) = try await WatchConnection.open(
                    to: target, request: request, clientName: watch.clientName, token: watch.token, tls: watch.tls, group: watch.group,
                    connectTimeout: Self.timeAmount(watch.connectTimeout), idleTimeout: Self.timeAmount(watch.idleTimeout))
                self.connection = connection
                server = accepted
            } catch {
                if case .server(let refusal) = error, !refusal.retryable { throw error }
                try await retry(after: error)
            }
        }

        /// Drops the connection and what it sent without a cursor, and moves to the next endpoint
        /// after the delay; throws after too many attempts in a row.
        private func retry(after error: (any Error)? = nil) async throws {
            drop()
            failures += 1
            if failures >= watch.maxAttempts {
                throw error ?? RegistryClientError.connectionClosed("the watch failed \(failures) times in a row")
            }
            endpoint += 1
            try await Task.sleep(for: watch.delay(afterFailures: failures))
        }

        private static func timeAmount(_ duration: Duration) -> TimeAmount {
            .nanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
        }

        private func drop() {
            connection?.close()
            connection = nil
            frames = []
            pending = []
        }
    }
}
