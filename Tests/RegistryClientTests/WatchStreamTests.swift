import Foundation
import NIOCore
import RegistryClient
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing

/// `RegistryWatch` against a scripted server on loopback: a plain socket that answers the hello,
/// waits for the watch request, then sends what the test gives it in one write and closes. Many
/// frames in one write reach the watch through one read, and it takes them together. The limits
/// are long: in a full test run a client's task can wait minutes for its turn on the cooperative
/// threads that the other suites hold.
@Suite(.timeLimit(.minutes(10))) struct WatchStreamTests {
    /// A watch frame of `count` created events from `first` on, ending with the cursor after them.
    private static func eventsFrame(first: UInt64, count: Int) -> ServerFrame {
        let events = (first..<first + UInt64(count)).map { sequence in
            WatchEventMessage(
                kind: WatchEventKind.created.rawValue, operation: LogPosition(origin: "node-a", epoch: 7, sequence: sequence), hlc: sequence << 16,
                vendor: "com.vendor", deviceID: String(format: "00000000-0000-4000-8000-%012llX", sequence))
        }
        let cursor = WatchCursor(clusterID: "cluster-t", positions: [LogPosition(origin: "node-a", epoch: 7, sequence: first + UInt64(count) - 1)])
        return ServerFrame(requestID: 1, body: .watchEvents(WatchEventsMessage(events: events, cursor: cursor)))
    }

    @Test func framesSentTogetherAreYieldedInOrderAndTheLastBeforeTheCloseIsNotLost() async throws {
        // 40 frames of 50 events, about 170 KB in one write: the watch reads them in a few reads,
        // several frames each.
        let frames = (0..<40).map { Self.eventsFrame(first: UInt64($0 * 50 + 1), count: 50) }
        let server = try ScriptedWatchServer(sending: frames)
        let watch = RegistryWatch(
            endpoints: [try Endpoint(parsing: "127.0.0.1:\(server.port)")], clientName: "watch-stream-test", retryDelay: .milliseconds(10),
            maxAttempts: 2, connectTimeout: .seconds(10))
        var sequences = [UInt64]()
        var cursors = [UInt64]()
        let iterator = watch.makeAsyncIterator()
        // After the 40 updates the server is gone: the watch fails its attempts to reconnect.
        await #expect(throws: RegistryClientError.self) {
            while let update = try await iterator.next() {
                sequences += update.events.map(\.operation.sequence)
                cursors.append(update.cursor.positions[0].sequence)
            }
        }
        #expect(sequences == Array(1...2_000))
        #expect(cursors == (1...40).map { UInt64($0 * 50) })
        #expect(try await server.receivedWatchRequest())
    }

    @Test func framesReadBeforeOneThatDoesNotDecodeAreYieldedBeforeTheWatchFailsAndNoneAfterIt() async throws {
        // Three frames, a fourth whose bytes are no ServerFrame, and a fifth, in one write: the
        // three reach the client in the same read as the bad one, which ends the connection. The
        // fifth is not yielded: its cursor would skip the bad frame's events.
        let frames = (0..<3).map { Self.eventsFrame(first: UInt64($0 * 10 + 1), count: 10) }
        var after = ByteBuffer()
        try Self.eventsFrame(first: 41, count: 10).encodeFrame(into: &after)
        let server = try ScriptedWatchServer(sending: frames, then: [0, 0, 0, 3, 0xFF, 0xFF, 0xFF] + Array(after.readableBytesView))
        let watch = RegistryWatch(
            endpoints: [try Endpoint(parsing: "127.0.0.1:\(server.port)")], clientName: "watch-stream-test", retryDelay: .milliseconds(10),
            maxAttempts: 2, connectTimeout: .seconds(10))
        var sequences = [UInt64]()
        let iterator = watch.makeAsyncIterator()
        await #expect(throws: RegistryClientError.self) {
            while let update = try await iterator.next() { sequences += update.events.map(\.operation.sequence) }
        }
        #expect(sequences == Array(1...30))
        #expect(try await server.receivedWatchRequest())
    }

    /// A node that sends events without a cursor and then drops the connection, every time,
    /// gives the watch no progress: it counts as failing, and the watch gives up after
    /// `maxAttempts` connections.
    @Test func eventsWithoutACursorAreNoProgressAndAttemptsRunOut() async throws {
        var frame = Self.eventsFrame(first: 1, count: 5)
        if case .watchEvents(let batch) = frame.body {
            frame = ServerFrame(requestID: 1, body: .watchEvents(WatchEventsMessage(events: batch.events, cursor: nil)))
        }
        let server = try ScriptedWatchServer(sending: [frame], connections: 10)
        let watch = RegistryWatch(
            endpoints: [try Endpoint(parsing: "127.0.0.1:\(server.port)")], clientName: "watch-stream-test", retryDelay: .milliseconds(10),
            maxAttempts: 3, connectTimeout: .seconds(10))
        let iterator = watch.makeAsyncIterator()
        await #expect(throws: RegistryClientError.self) {
            while try await iterator.next() != nil { Issue.record("a span without its cursor was yielded") }
        }
        #expect(server.watchRequestsAnswered == 3)
    }
}

/// One connection's worth of a node (or several, one after the other): accepts on 127.0.0.1, answers the first frame (the
/// hello) with `HelloAccepted`, reads the second (the watch request), writes `frames` and then
/// the bytes `trailing` in one write, and closes. Runs on a thread of its own, whose socket calls
/// give up after 5 minutes, so that a client that never connects or never asks fails the test
/// rather than hangs it. The limit is long: in a full test run a client's task can wait minutes
/// for a thread between answering the hello and asking to watch.
private final class ScriptedWatchServer: Sendable {
    let port: UInt16
    /// Whether the watch request came; nil while the server runs.
    private let outcome = Mutex<Bool?>(nil)

    /// Watch requests answered so far.
    private let answered = Mutex(0)
    var watchRequestsAnswered: Int { answered.withLock { $0 } }

    /// Serves `connections` connections one after the other, each the same way.
    init(sending frames: [ServerFrame], then trailing: [UInt8] = [], connections: Int = 1) throws {
        let (listener, port) = try #require(listeningLoopbackSocket(), "cannot listen on 127.0.0.1")
        try #require(Self.limitWaits(of: listener), "cannot set a receive timeout")
        self.port = UInt16(port)
        var hello = ByteBuffer()
        try ServerFrame(
            requestID: 0,
            body: .helloAccepted(HelloAccepted(version: .current, nodeID: "node-a", clusterID: "cluster-t", serverVersion: "test", limits: .default))
        ).encodeFrame(into: &hello)
        var stream = ByteBuffer()
        for frame in frames { try frame.encodeFrame(into: &stream) }
        let helloBytes = Array(hello.readableBytesView)
        let streamBytes = Array(stream.readableBytesView) + trailing
        let thread = Thread { [self] in
            var sawWatch = false
            defer { outcome.withLock { $0 = sawWatch } }
            defer { close(listener) }
            for _ in 0..<connections {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                defer { close(connection) }
                guard Self.limitWaits(of: connection) else { return }
                guard Self.readFrame(connection) != nil, Self.send(helloBytes, to: connection) else { return }
                guard let request = Self.readFrame(connection), (try? ClientFrame(decoding: ByteBuffer(bytes: request)))?.body.isWatch == true else { return }
                sawWatch = true
                answered.withLock { $0 += 1 }
                _ = Self.send(streamBytes, to: connection)
            }
        }
        thread.start()
    }

    /// Whether the watch request came, once the server is done (false if it is not within the
    /// server's own limit); waits without holding a thread.
    func receivedWatchRequest() async throws -> Bool {
        _ = try await poll(upTo: .seconds(310)) { outcome.withLock { $0 } != nil }
        return outcome.withLock { $0 } ?? false
    }

    /// Makes `accept` and `recv` on `descriptor` fail after 5 minutes rather than wait for ever.
    private static func limitWaits(of descriptor: Int32) -> Bool {
        var limit = timeval(tv_sec: 300, tv_usec: 0)
        return setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size)) == 0
    }

    /// One length-prefixed frame's payload; nil if the connection ends first.
    private static func readFrame(_ descriptor: Int32) -> [UInt8]? {
        guard let head = readExactly(4, from: descriptor) else { return nil }
        let length = head.reduce(0) { $0 << 8 | Int($1) }
        return readExactly(length, from: descriptor)
    }

    private static func readExactly(_ count: Int, from descriptor: Int32) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let received = bytes.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress! + filled, count - filled, 0) }
            guard received > 0 else { return nil }
            filled += received
        }
        return bytes
    }

    private static func send(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }
}

extension ClientBody {
    fileprivate var isWatch: Bool {
        if case .watch = self { return true }
        return false
    }
}
