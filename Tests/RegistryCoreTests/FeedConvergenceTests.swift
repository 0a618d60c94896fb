import RegistryTestSupport
import Testing
@testable import RegistryCore

/// Three nodes that register, bind, unbind and forget, replicate each log in order but logs in
/// any order, commit now and then, and restart from a snapshot; one watcher that reads a node's
/// feed a few events at a time and moves to another node with its cursor, or re-reads the state
/// when its cursor expired. Once everything is delivered, what the watcher made of its events
/// is what the node holds, and what the operations alone say (``ExpectedCanonical``).
struct FeedWorkload {
    struct Node {
        let log: LogID
        var state = RegistryState()
        var clock = HybridLogicalClock()
        /// Operations applied, in order: the node's journal.
        var journal: [LoggedOperation] = []
        var vector = VersionVector()
        var staged: [FeedEntry] = []
        var feed: ChangeFeed

        init(name: String, capacity: Int) {
            log = LogID(origin: NodeID(trusted: name), epoch: 1)
            state.recordEvents(configuredRules: [])
            feed = ChangeFeed(capacity: capacity, holding: VersionVector())
        }

        mutating func applied(_ operation: LoggedOperation) {
            journal.append(operation)
            vector.raise(to: operation.sequence, in: operation.log)
            let events = state.takeEvents()
            for event in events {
                staged.append(FeedEntry(log: operation.log, sequence: operation.sequence, time: operation.timestamp, event: event))
            }
        }

        mutating func commit() {
            feed.publish(staged, through: vector)
            staged = []
        }

        /// A restart: the state of a snapshot of the first `covered` operations, the rest of
        /// the journal replayed with events, the feed starting at the snapshot.
        mutating func restart(covered: Int) {
            let journal = self.journal
            state = RegistryState()
            vector = VersionVector()
            for operation in journal.prefix(covered) {
                state.apply(operation.operation)
                vector.raise(to: operation.sequence, in: operation.log)
            }
            state.recordEvents(configuredRules: [])
            feed = ChangeFeed(capacity: feed.capacity, holding: vector)
            self.journal = Array(journal.prefix(covered))
            staged = []
            for operation in journal.dropFirst(covered) {
                state.apply(operation.operation)
                applied(operation)
            }
            commit()
        }
    }

    var nodes: [Node]
    var operations: [LoggedOperation] = []
    var view = FeedFold()
    var expiries = 0
    var moves = 0
    var delivered = 0
    /// Cursors at which the watcher's view was checked against its operations' state.
    var checkedCursors = 0

    init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let capacity = [6, 20, 1_000][Int(random.next() % 3)]
        nodes = ["node-a", "node-b", "node-c"].map { Node(name: $0, capacity: capacity) }
        let rules = try! VendorRules()
        let key = MintingKey(secret: "feed \(seed)")
        let identifiers = (0..<8).map { _ in UUID128(high: random.next() | 1, low: random.next()) }
        var watched = 0
        var reader = try! FeedReader(feed: nodes[0].feed, after: VersionVector(), filter: .everything)
        // What the watcher holds: its view and cursor as of the last batch that ended with a
        // cursor, and the events received since, applied only once a cursor follows them.
        var cursor = VersionVector()
        var pending: [FeedEvent] = []

        var checkedCursors = 0
        func receive(_ batch: FeedBatch, caughtUp: Bool, view: inout FeedFold, operations: [LoggedOperation], random: inout SplitMix64) {
            pending += batch.entries.map(\.event)
            guard let next = batch.cursor else { return }
            for event in pending { view.fold(event) }
            pending = []
            cursor = next
            // A cursor names a state: the watcher's view is what the operations it names make,
            // in any order, whichever nodes the events came from. Checked at every fourth cursor
            // of a reader that read to the feed's end: one that stopped inside an operation gave
            // some of its events, and the cursor before it.
            guard caughtUp, random.next() % 4 == 0 else { return }
            checkedCursors += 1
            var named = RegistryState()
            for operation in operations where operation.sequence <= next[operation.log] { named.apply(operation.operation) }
            if let difference = view.difference(from: FeedFold(reading: named)) {
                Issue.record("seed \(seed): at cursor \(next), the watcher's view is not its operations' state: \(difference)")
            }
        }

        func move(to node: Int, nodes: inout [Node], view: inout FeedFold, expiries: inout Int) {
            // A connection that ends drops what came without a cursor.
            pending = []
            var node = node
            do {
                do {
                    reader = try FeedReader(feed: nodes[node].feed, after: cursor, filter: .everything)
                } catch FeedReadError.notCaughtUp {
                    // The node does not hold the cursor yet: the watcher stays where it was (which
                    // holds it), or comes back to it when that node restarted.
                    node = watched
                    reader = try FeedReader(feed: nodes[node].feed, after: cursor, filter: .everything)
                }
            } catch {
                // Expired: read the state, and watch from what it holds.
                expiries += 1
                nodes[node].commit()
                view = FeedFold(reading: nodes[node].state)
                reader = try! FeedReader(feed: nodes[node].feed, after: nil, filter: .everything)
                cursor = reader.cursor!
            }
            watched = node
        }

        for step in 0..<240 {
            let roll = random.next() % 100
            let n = Int(random.next() % 3)
            if roll < 40 {
                let now = nodes[n].clock.tick(wallMillis: UInt64(1_000 + step / 6))
                let sequence = UInt64(nodes[n].journal.filter { $0.log == nodes[n].log }.count + 1)
                let operation: Operation
                let kind = random.next() % 10
                if kind < 6 || nodes[n].state.deviceCount == 0 {
                    let presented = ConvergenceWorkloads.presented(from: identifiers, using: &random)
                    let registration = try! Registration(bundle: ["com.v.a", "com.v.b"][Int(random.next() % 2)], identifiers: presented, rules: rules)
                    operation = .registration(
                        nodes[n].state.register(registration, at: now, origin: nodes[n].log.origin) { generation in
                            DeviceID.new(for: registration, at: now, generation: generation, key: key, using: &random)
                        }.operation)
                } else {
                    let known = nodes[n].state.snapshot().devices.keys.sorted()
                    let device = known[Int(random.next() % UInt64(known.count))]
                    if kind < 9 {
                        operation = .binding(
                            BindingChange(
                                kind: random.next() % 3 == 0 ? .unbind : .bind, vendor: Vendor(trusted: "com.v"),
                                account: UUID128(high: 0xACC, low: random.next() % 3), device: device, time: now, origin: nodes[n].log.origin))
                    } else {
                        operation = .forget(ForgetOp(device: nodes[n].state.canonical(of: device)!, vendor: Vendor(trusted: "com.v")))
                    }
                    nodes[n].state.apply(operation)
                }
                let logged = LoggedOperation(origin: nodes[n].log.origin, epoch: 1, sequence: sequence, timestamp: now, operation: operation)
                operations.append(logged)
                nodes[n].applied(logged)
            } else if roll < 70 {
                // Node n hears the next operation of another log.
                let source = (n + 1 + Int(random.next() % 2)) % 3
                let log = nodes[source].log
                let held = nodes[n].vector[log]
                if let next = operations.first(where: { $0.log == log && $0.sequence == held + 1 }) {
                    nodes[n].state.apply(next.operation)
                    nodes[n].applied(next)
                }
            } else if roll < 82 {
                nodes[n].commit()
            } else if roll < 84 {
                nodes[n].restart(covered: Int(random.next() % UInt64(nodes[n].journal.count + 1)))
                if n == watched { move(to: n, nodes: &nodes, view: &view, expiries: &expiries) }
            } else if roll < 89 {
                moves += 1
                move(to: n, nodes: &nodes, view: &view, expiries: &expiries)
            }
            // The watcher reads a few events.
            if random.next() % 2 == 0 {
                do {
                    let batch = try reader.read(nodes[watched].feed, limit: Int(random.next() % 6) + 1)
                    for entry in batch.entries {
                        delivered += 1
                        #expect(operations.contains { $0.log == entry.log && $0.sequence == entry.sequence }, "seed \(seed): an event of no operation")
                    }
                    receive(batch, caughtUp: reader.isCaughtUp(in: nodes[watched].feed), view: &view, operations: operations, random: &random)
                } catch {
                    move(to: watched, nodes: &nodes, view: &view, expiries: &expiries)
                }
            }
        }
        // Every node hears everything, and commits; the watcher reads to the end.
        for n in 0..<3 {
            for operation in operations where operation.sequence > nodes[n].vector[operation.log] {
                nodes[n].state.apply(operation.operation)
                nodes[n].applied(operation)
            }
            nodes[n].commit()
        }
        while true {
            do {
                let batch = try reader.read(nodes[watched].feed, limit: 50)
                delivered += batch.entries.count
                receive(batch, caughtUp: reader.isCaughtUp(in: nodes[watched].feed), view: &view, operations: operations, random: &random)
                if reader.isCaughtUp(in: nodes[watched].feed) { break }
            } catch {
                move(to: watched, nodes: &nodes, view: &view, expiries: &expiries)
            }
        }
        #expect(pending.isEmpty && cursor == nodes[watched].vector, "seed \(seed): the cursor of a watcher that is caught up is what the node holds")
        self.checkedCursors = checkedCursors
    }
}

@Suite(.offThePool) struct FeedConvergenceTests {
    @Test func aWatcherThatMovesBetweenNodesEndsWithWhatTheNodeAndTheOperationsSay() {
        var (expiries, moves, delivered, checked) = (0, 0, 0, 0)
        for seed in UInt64(1)...300 {
            let workload = FeedWorkload(seed: seed)
            expiries += workload.expiries
            moves += workload.moves
            delivered += workload.delivered
            checked += workload.checkedCursors
            #expect(workload.nodes[1].state.snapshot() == workload.nodes[0].state.snapshot() && workload.nodes[2].state.snapshot() == workload.nodes[0].state.snapshot(), "seed \(seed): the nodes differ")
            // Every node holds every operation; the watcher's node is one of them.
            let state = workload.nodes[0].state
            let expected = FeedFold(reading: state)
            let view = workload.view.normalised
            #expect(workload.view.difference(from: expected) == nil, "seed \(seed): \(workload.view.difference(from: expected) ?? "")")
            // And from the operations alone.
            let oracle = ExpectedCanonical(workload.operations)
            let oracleCanonical = Dictionary(uniqueKeysWithValues: oracle.canonical.map { (DeviceID($0.key), DeviceID($0.value)) })
            #expect(view.canonical == oracleCanonical, "seed \(seed): the watcher's devices differ from the operations'")
        }
        #expect(
            expiries > 0 && moves > 100 && delivered > 10_000 && checked > 1_000,
            "the workload should expire cursors (\(expiries)), move (\(moves)), deliver (\(delivered)) and check cursors (\(checked))")
    }
}

