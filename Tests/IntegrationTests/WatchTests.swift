import Foundation
import Platform
import RegistryClient
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing

/// What a watcher made of the events it received, written apart from the node: each device ID
/// to the device it is now, the forgotten IDs, and each account's devices. And the test's own
/// record of what it did, the oracle: the IDs its registrations were given.
final class WatchedView: Sendable {
    struct State {
        var canonical: [String: String] = [:]
        var gone: Set<String> = []
        var bound: [String: Set<String>] = [:]
        var events: [WatchEventMessage] = []
        var cursor: WatchCursor?
        var failure: (any Error)?
    }

    let state = Mutex(State())

    func apply(_ update: WatchUpdate) {
        state.withLock { state in
            for event in update.events {
                state.events.append(event)
                switch WatchEventKind(rawValue: event.kind) {
                case .created: if state.canonical[event.deviceID] == nil { state.canonical[event.deviceID] = event.deviceID }
                case .merged:
                    state.canonical[event.deviceID] = event.deviceID
                    for other in event.otherDeviceIDs { state.canonical[other] = event.deviceID }
                case .forgotten: state.gone.formUnion([event.deviceID] + event.otherDeviceIDs)
                case .bound, .unbound: state.bound[event.accountID] = Set(event.boundDeviceIDs)
                case .cloneSuspected, .split: break
                case nil: break
                }
            }
            state.cursor = update.cursor
        }
    }

    /// Follows `watch` in a task of its own until cancelled or it fails.
    func follow(_ watch: RegistryWatch) -> Task<Void, Never> {
        Task {
            do {
                for try await update in watch { apply(update) }
            } catch {
                state.withLock { $0.failure = error }
            }
        }
    }

    /// Waits (up to `seconds` of this task's time, ``poll(upTo:every:until:)``) until `done` holds
    /// of the state, or the watch failed.
    func wait(_ seconds: Int = 20, until done: (State) -> Bool) async throws -> State {
        _ = try await poll(upTo: .seconds(seconds), every: .milliseconds(50)) {
            let now = state.withLock { $0 }
            return done(now) || now.failure != nil
        }
        return state.withLock { $0 }
    }
}

/// A node of its own, a client of it, and a watcher that follows it from now, with the first
/// cursor it was given.
struct WatchedNode {
    let temp: TemporaryDirectory
    let node: DaemonProcess
    let endpoint: Endpoint
    let client: RegistryClient
    let view: WatchedView
    let following: Task<Void, Never>
    let early: WatchCursor

    init(clusterID: String) async throws {
        temp = try TemporaryDirectory()
        node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--cluster-id", clusterID])
        endpoint = try Endpoint(parsing: node.endpoint)
        client = try await RegistryClient.connect(to: endpoint, clientName: "watch-test")
        view = WatchedView()
        following = view.follow(RegistryWatch(endpoints: [endpoint], clientName: "watch-test"))
        early = try #require(try await view.wait { $0.cursor != nil }.cursor)
    }

    func stop() {
        following.cancel()
        node.stop()
        temp.remove()
    }
}

@Suite(.serialized, .timeLimit(.minutes(5))) struct WatchTests {
    /// Registers `count` devices through `client`, each an app with an IDFV and a keychain UUID;
    /// one in five also a sibling app that shares the keychain UUID but presents a new IDFV, first
    /// on its own (a device of its own) and then with the keychain UUID (the two merge).
    func registerDevices(_ count: Int, on client: RegistryClient, tag: UInt64) async throws -> (created: Set<String>, merged: Int, firsts: [String]) {
        var created = Set<String>()
        var firsts = [String]()
        var merged = 0
        for index in 0..<count {
            let keychain = UUID128(high: tag << 32 | UInt64(index), low: 1).text
            let idfv = UUID128(high: tag << 32 | UInt64(index), low: 2).text
            let first = try await client.register(RegisterRequest(bundleID: "com.watch.app1", keychain: keychain, idfv: idfv))
            if first.created { created.insert(first.deviceID) }
            firsts.append(first.deviceID)
            guard index % 5 == 0 else { continue }
            let siblingIDFV = UUID128(high: tag << 32 | UInt64(index), low: 3).text
            let alone = try await client.register(RegisterRequest(bundleID: "com.watch.app2", idfv: siblingIDFV))
            if alone.created { created.insert(alone.deviceID) }
            let joined = try await client.register(RegisterRequest(bundleID: "com.watch.app2", keychain: keychain, idfv: siblingIDFV))
            if !joined.replacedDeviceIDs.isEmpty { merged += 1 }
        }
        return (created, merged, firsts)
    }

    /// The view agrees with the node: every device the test created is known, every ID the view
    /// holds resolves on the node to the device the view says, and no event names a device the
    /// node does not know.
    func expectAgrees(_ state: WatchedView.State, with client: RegistryClient, created: Set<String>, _ what: String) async throws {
        #expect(state.failure == nil, "\(what): \(String(describing: state.failure))")
        #expect(created.isSubset(of: Set(state.canonical.keys)), "\(what): \(created.subtracting(state.canonical.keys).count) created devices never reported")
        for (id, canonical) in state.canonical where !state.gone.contains(id) {
            let record = try await client.resolve(deviceID: id)
            #expect(record.deviceID == canonical, "\(what): \(id) is \(record.deviceID) on the node, \(canonical) to the watcher")
        }
    }

    @Test func aWatcherHearsEveryChangeAndResumesAfterAKillOnTheSameNodeAndOnAnother() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let a = try Endpoint(parsing: cluster.nodes[0].endpoint)
        let clientA = try await RegistryClient.connect(to: a, clientName: "watch-test")

        let view = WatchedView()
        let first = view.follow(RegistryWatch(endpoints: [a], vendors: ["com.watch"], clientName: "watch-test"))
        _ = try await view.wait { $0.cursor != nil }
        let (created, merged, firsts) = try await registerDevices(40, on: clientA, tag: 1)
        #expect(merged == 8)
        // An account bound, then moved to another device; a device forgotten. (The first app's
        // devices stay canonical: each merge joins a sibling's later device to one.)
        let devices = firsts
        _ = try await clientA.bind(account: "alice", deviceID: devices[0], scope: .vendor("com.watch"))
        _ = try await clientA.unbind(account: "alice", deviceID: devices[0], scope: .vendor("com.watch"))
        _ = try await clientA.bind(account: "alice", deviceID: devices[1], scope: .vendor("com.watch"))
        let forgotten = try await clientA.forget(deviceID: devices[2])
        let state = try await view.wait { $0.gone.contains(forgotten.deviceID) && $0.bound.values.contains([devices[1]]) }
        try await expectAgrees(state, with: clientA, created: created, "on node-a")
        #expect(state.events.filter { $0.kind == WatchEventKind.merged.rawValue }.count >= 8)
        #expect(state.events.contains { $0.kind == WatchEventKind.unbound.rawValue && $0.deviceID == devices[0] && $0.unbindReason == .unbound })
        #expect(state.bound == [state.bound.keys.first ?? "": [devices[1]]], "alice is on devices[1] alone: \(state.bound)")
        #expect(state.gone.isSuperset(of: [forgotten.deviceID] + forgotten.aliasIDs))
        // No other vendor's events: one registered before a device of the vendor never shows.
        _ = try await clientA.register(RegisterRequest(bundleID: "com.elsewhere.app", idfv: UUID128(high: 9, low: 9).text))
        let marker = try await clientA.register(RegisterRequest(bundleID: "com.watch.app1", idfv: UUID128(high: 9, low: 10).text))
        let filtered = try await view.wait { $0.canonical[marker.deviceID] != nil }
        #expect(filtered.canonical[marker.deviceID] != nil && !filtered.events.contains { $0.vendor != "com.watch" })
        first.cancel()
        await clientA.close()
        let cursor = try #require(filtered.cursor)

        // node-a is killed; more devices arrive through node-b; node-a comes back from its journal.
        cluster.nodes[0].stop(signal: SIGKILL)
        let b = try Endpoint(parsing: cluster.nodes[1].endpoint)
        let clientB = try await RegistryClient.connect(to: b, clientName: "watch-test")
        let (more, _, _) = try await registerDevices(30, on: clientB, tag: 2)
        cluster.nodes[0] = try cluster.start(0)
        _ = try await cluster.converged(within: 30)

        // Resumed from the cursor on node-a after its restart, and on node-c: every later device.
        for (name, endpoint) in [("node-a after kill -9", cluster.nodes[0].endpoint), ("node-c", cluster.nodes[2].endpoint)] {
            let resumed = WatchedView()
            resumed.state.withLock { $0.canonical = filtered.canonical; $0.gone = filtered.gone; $0.bound = filtered.bound }
            let task = resumed.follow(RegistryWatch(endpoints: [try Endpoint(parsing: endpoint)], vendors: ["com.watch"], from: cursor, clientName: "watch-test"))
            let after = try await resumed.wait { more.isSubset(of: Set($0.canonical.keys)) }
            task.cancel()
            let client = try await RegistryClient.connect(to: try Endpoint(parsing: endpoint), clientName: "watch-test")
            try await expectAgrees(after, with: client, created: created.union(more), name)
            await client.close()
        }
        await clientB.close()
    }

    @Test func aWatchGoesOnFromItsCursorOnAnotherNodeWhenItsNodeStops() async throws {
        let cluster = try ClusterTests.Cluster(perNode: [["--drain-timeout-seconds", "120"]])
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let (a, b) = (try Endpoint(parsing: cluster.nodes[0].endpoint), try Endpoint(parsing: cluster.nodes[1].endpoint))
        let view = WatchedView()
        let task = view.follow(RegistryWatch(endpoints: [a, b], vendors: ["com.watch"], clientName: "watch-test", retryDelay: .milliseconds(50)))
        defer { task.cancel() }
        _ = try await view.wait { $0.cursor != nil }
        let clientA = try await RegistryClient.connect(to: a, clientName: "watch-test")
        let (before, _, _) = try await registerDevices(10, on: clientA, tag: 3)
        _ = try await view.wait { before.isSubset(of: Set($0.canonical.keys)) }
        await clientA.close()
        // A clean stop ends the stream at once (the node drains), and the watch goes on from node-b.
        // Node-a drains for up to 120 s: a stream that held the drain up would outlast `stop`'s
        // 30 s, and the node would be killed (status 9).
        #expect(cluster.nodes[0].stop() == 0, "a watch stream held up the node's stop")
        let clientB = try await RegistryClient.connect(to: b, clientName: "watch-test")
        let (after, _, _) = try await registerDevices(10, on: clientB, tag: 4)
        let state = try await view.wait { after.isSubset(of: Set($0.canonical.keys)) }
        try await expectAgrees(state, with: clientB, created: before.union(after), "after node-a stopped")
        await clientB.close()
    }

    /// A node that stops sending without closing its connections (SIGSTOP: its sockets stay
    /// open) is given up once it has sent nothing, not even progress, for the watch's idle
    /// timeout, and the watch goes on from its cursor on the next node. It waited for the stopped
    /// node for as long as TCP kept the connection.
    @Test func aWatchGivesUpANodeThatFallsSilentAndGoesOnFromAnother() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        for node in cluster.nodes { try await ClusterTests.waitUntilStreaming(node.endpoint, to: 2) }
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: Binaries.path("registryctl"))
        watch.arguments = [
            "watch", "--vendor", "com.idle", "--count", "1", "--progress", "--idle-timeout", "2", "--timeout", "2", "--also",
            cluster.nodes[1].endpoint, "-o", "json",
        ]
        watch.environment = ProcessInfo.processInfo.environment.merging(["REGISTRY_ENDPOINT": cluster.nodes[0].endpoint]) { $1 }
        let watched = OutputFiles(for: watch)
        defer { watched.remove() }
        try watch.run()
        defer { if watch.isRunning { end(watch, grace: 1) } }
        // Mid-stream: node-a's progress has reached the watch when node-a stops.
        let streaming = try await poll(upTo: .seconds(60), every: .milliseconds(50)) { watched.stdout.contains("cursor") || !watch.isRunning }
        try #require(streaming && watch.isRunning, "\(watched.stdout)\n\(watched.stderr)")
        let pid = cluster.nodes[0].process.processIdentifier
        _ = Platform.kill(pid, SIGSTOP)
        defer { _ = Platform.kill(pid, SIGCONT) }  // before the cluster's stop, which it must receive
        let client = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[1].endpoint), clientName: "watch-test")
        let made = try await client.register(RegisterRequest(bundleID: "com.idle.app", idfv: UUID().uuidString))
        await client.close()
        let ended = waitForExit(of: watch, timeout: 60)
        #expect(ended && watch.terminationStatus == 0, "\(watched.stdout)\n\(watched.stderr)")
        #expect(watched.stdout.contains(made.deviceID), "the event, from node-b: \(watched.stdout)")
    }

    @Test func aCursorPastTheHistoryOrBeforeTheSnapshotARestartCameFromExpires() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--watch-history", "1000", "--cluster-id", "expiry"])
        defer { node.stop() }
        let endpoint = try Endpoint(parsing: node.endpoint)
        let client = try await RegistryClient.connect(to: endpoint, clientName: "watch-test")
        let view = WatchedView()
        let task = view.follow(RegistryWatch(endpoints: [endpoint], clientName: "watch-test"))
        let early = try await view.wait { $0.cursor != nil }.cursor!
        task.cancel()
        // 1,500 first installs: more than the node keeps.
        for chunk in 0..<15 {
            _ = try await client.registerBatch((0..<100).map { RegisterRequest(bundleID: "com.watch.app", idfv: UUID128(high: UInt64(chunk + 1), low: UInt64($0 + 1)).text) })
        }
        var refused: (any Error)?
        do {
            for try await _ in RegistryWatch(endpoints: [endpoint], from: early, clientName: "watch-test") {}
        } catch {
            refused = error
        }
        #expect((refused as? RegistryClientError).map { if case .server(let e) = $0 { e.code == .cursorExpired } else { false } } == true, "\(String(describing: refused))")

        // A cursor from now, then a snapshot and a kill: the restart's feed starts at the snapshot.
        let now = WatchedView()
        let watching = now.follow(RegistryWatch(endpoints: [endpoint], clientName: "watch-test"))
        let recent = try await now.wait { $0.cursor != nil }.cursor!
        watching.cancel()
        _ = try await client.registerBatch((0..<10).map { RegisterRequest(bundleID: "com.watch.app", idfv: UUID128(high: 99, low: UInt64($0 + 1)).text) })
        _ = try await client.snapshot()
        await client.close()
        node.stop(signal: SIGKILL)
        let restarted = try DaemonProcess(dataDirectory: temp.path, arguments: ["--watch-history", "1000", "--cluster-id", "expiry"])
        defer { restarted.stop() }
        do {
            for try await _ in RegistryWatch(endpoints: [try Endpoint(parsing: restarted.endpoint)], from: recent, clientName: "watch-test") {}
            Issue.record("a cursor from before the snapshot the node restarted from resumed")
        } catch RegistryClientError.server(let error) {
            #expect(error.code == .cursorExpired && error.message.contains("read the state again"), "\(error)")
        }
    }

    /// A watcher that comes back to the node its cursor came from gets the backlog a frame at a
    /// time, each with its cursor: the node held that cursor, so no span waits for the end.
    @Test func aWatcherThatResumesOnItsOwnNodeGetsTheBacklogAFrameAtATime() async throws {
        let watched = try await WatchedNode(clusterID: "backlog")
        defer { watched.stop() }
        let (endpoint, client, early) = (watched.endpoint, watched.client, watched.early)
        watched.following.cancel()
        for chunk in 0..<10 {
            _ = try await client.registerBatch((0..<100).map { RegisterRequest(bundleID: "com.backlog.app", idfv: UUID128(high: UInt64(chunk + 1), low: UInt64($0 + 1)).text) })
        }
        await client.close()
        var sizes = [Int]()
        var created = 0
        for try await update in RegistryWatch(endpoints: [endpoint], from: early, clientName: "watch-test") {
            sizes.append(update.events.count)
            created += update.events.filter { $0.kind == WatchEventKind.created.rawValue }.count
            if created >= 1_000 { break }
        }
        #expect(created == 1_000)
        #expect(sizes.count >= 4 && sizes.allSatisfy { $0 <= 256 }, "updates of \(sizes) events")
    }

    /// A watcher that resumes from before a forget is not given what the forgotten device's
    /// accounts were (docs/security.md): the binds before the forget are erased from the feed,
    /// and only the forget's own events name the account, to say it is bound to nothing now.
    @Test func aWatcherThatResumesFromBeforeAForgetIsNotGivenTheForgottenDevicesAccounts() async throws {
        let watched = try await WatchedNode(clusterID: "erasure")
        defer { watched.stop() }
        let (endpoint, client, early, before, task) = (watched.endpoint, watched.client, watched.early, watched.view, watched.following)

        let device = try await client.register(RegisterRequest(bundleID: "com.erase.app", idfv: UUID128(high: 0xE1, low: 1).text)).deviceID
        let other = try await client.register(RegisterRequest(bundleID: "com.erase.app", idfv: UUID128(high: 0xE2, low: 2).text)).deviceID
        _ = try await client.bind(account: "leaving-user", deviceID: device, scope: .vendor("com.erase"))
        _ = try await client.bind(account: "staying-user", deviceID: other, scope: .vendor("com.erase"))
        // The watcher that was following saw the bind: there is something to erase.
        let seen = try await before.wait { $0.events.filter { $0.kind == WatchEventKind.bound.rawValue }.count == 2 }
        task.cancel()
        let leaving = try #require(seen.events.first { $0.kind == WatchEventKind.bound.rawValue && $0.deviceID == device }?.accountID)
        let staying = try #require(seen.events.first { $0.kind == WatchEventKind.bound.rawValue && $0.deviceID == other }?.accountID)
        _ = try await client.forget(deviceID: device)
        await client.close()

        let after = WatchedView()
        let resumed = after.follow(RegistryWatch(endpoints: [endpoint], from: early, clientName: "watch-test"))
        defer { resumed.cancel() }
        let state = try await after.wait { $0.events.contains { $0.kind == WatchEventKind.forgotten.rawValue } }
        #expect(state.failure == nil, "\(String(describing: state.failure))")
        let forget = try #require(state.events.first { $0.kind == WatchEventKind.forgotten.rawValue }).operation
        for event in state.events where event.accountID == leaving {
            #expect(event.operation == forget, "an event before the forget names the forgotten device's account: \(event)")
        }
        #expect(state.bound[leaving] == [], "the forget says the account is bound to nothing now")
        #expect(state.events.contains { $0.accountID == staying && $0.deviceID == other }, "another device's account is kept")
        #expect(state.gone.contains(device) && state.canonical[other] == other)
    }

    @Test func badCursorsKindsVendorsAndOneWatcherTooManyAreRefusedWithTypedErrors() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let secret = "watch token secret 0123456789abcdef"
        let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--token-secret", secret, "--max-watchers", "1", "--cluster-id", "mine"])
        defer { node.stop() }
        let endpoint = try Endpoint(parsing: node.endpoint)
        func token(_ arguments: [String]) throws -> String {
            let result = try run(Binaries.path("registryctl"), ["token", "issue"] + arguments, environment: ["REGISTRY_TOKEN_SECRET": secret])
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let acme = try token(["--vendor", "com.acme", "--role", "read"])
        func refusal(_ request: WatchRequestMessage, token: String) async throws -> WireError? {
            let iterator = RegistryWatch(
                endpoints: [endpoint], vendors: request.vendors, kinds: request.kinds.compactMap(WatchEventKind.init(rawValue:)),
                from: request.cursor, clientName: "watch-test", token: token, maxAttempts: 1
            ).makeAsyncIterator()
            do {
                _ = try await iterator.next()
                return nil
            } catch RegistryClientError.server(let error) {
                return error
            }
        }
        let otherCluster = try await refusal(WatchRequestMessage(cursor: WatchCursor(clusterID: "theirs", positions: [])), token: acme)
        #expect(otherCluster?.code == .invalidCursor && otherCluster?.message.contains("theirs") == true)
        let malformed = try await refusal(
            WatchRequestMessage(cursor: WatchCursor(clusterID: "mine", positions: [LogPosition(origin: "Not A Node", epoch: 1, sequence: 1)])), token: acme)
        #expect(malformed?.code == .invalidCursor)
        let vendor = try await refusal(WatchRequestMessage(vendors: ["com.other"]), token: acme)
        #expect(vendor?.code == .permissionDenied)

        // An unknown kind goes through the wire raw: the node names the kinds it knows.
        let connection = try await RegistryClient.connect(to: endpoint, clientName: "watch-test", token: acme)
        let unknownKind = try await connection.send(.watch(WatchRequestMessage(kinds: [99])))
        guard case .error(let kindError) = unknownKind else { Issue.record("\(unknownKind)"); return }
        #expect(kindError.code == .invalidArgument && kindError.message.contains("created (1)"))

        // One watcher is allowed; the second is refused, retryably, and the first goes on.
        let view = WatchedView()
        let task = view.follow(RegistryWatch(endpoints: [endpoint], clientName: "watch-test", token: acme))
        _ = try await view.wait { $0.cursor != nil }
        let iterator = RegistryWatch(endpoints: [endpoint], clientName: "watch-test", token: acme, retryDelay: .milliseconds(10), maxAttempts: 2).makeAsyncIterator()
        do {
            _ = try await iterator.next()
            Issue.record("a second watcher was served past --max-watchers 1")
        } catch RegistryClientError.server(let error) {
            #expect(error.code == .tooManyWatchers && error.retryable)
        }
        task.cancel()
        // Once the first watcher has gone, its place is free again.
        try await Task.sleep(for: .milliseconds(300))
        let third = RegistryWatch(endpoints: [endpoint], clientName: "watch-test", token: acme, maxAttempts: 3).makeAsyncIterator()
        #expect(try await third.next() != nil)
    }
}
