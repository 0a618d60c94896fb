import RegistryCore
import RegistryTestSupport
@testable import RegistryServer

/// A watcher of the change feed in the simulation: it reads a few events at a time from one
/// node's feed (its ``WatchHub``, as a ``WatchHandler`` does), applies them only once a cursor
/// follows them, moves now and then to another member with its cursor, comes back when a node
/// does not hold the cursor yet, pauses now and then, starts again from the node's state when its cursor expired
/// (a restart from a snapshot, a peer's snapshot installed, the feed trimmed), and reopens its
/// reader when its node restarted. Its choices come from a random stream of its own, so the
/// simulation's other draws are what they were without it.
final class SimulatedWatcher {
    struct Counts: Equatable {
        var moves = 0, expiries = 0, notCaughtUp = 0, events = 0, reopened = 0
        /// Seeds whose final catch-up had to read the state again (the check then compares less).
        var finalReReads = 0

        mutating func add(_ other: Counts) {
            moves += other.moves
            expiries += other.expiries
            notCaughtUp += other.notCaughtUp
            events += other.events
            reopened += other.reopened
            finalReReads += other.finalReReads
        }
    }

    private var random: SplitMix64
    private var node = 0
    /// The hub its reader reads: another one means the node restarted.
    private var hub: WatchHub?
    private var reader: FeedReader?
    private var cursor: VersionVector?
    private var pending: [FeedEvent] = []
    private(set) var view = FeedFold()
    private(set) var counts = Counts()

    init(seed: UInt64) {
        random = SplitMix64(seed: seed ^ 0x5EED_FEED_0000_0041)
    }

    /// Steps left of a pause: a watcher that stops reading for a while falls behind its node's
    /// short history.
    private var paused = 0

    /// One step of the simulation: now and then a move, or a pause, then a few events.
    func step(_ simulation: ClusterSimulation) {
        if paused > 0 {
            paused -= 1
            return
        }
        if random.next() % 25 == 0 {
            paused = Int(random.next() % 40) + 20
            return
        }
        if random.next() % 10 == 0 { move(to: Int(random.next() % UInt64(simulation.nodes.count)), simulation) }
        read(limit: Int(random.next() % 8) + 1, simulation)
    }

    /// On a quiet cluster: reads a member's feed to the end, and says what its view lacks or
    /// gets wrong against that member's state; nil when nothing.
    func finish(_ simulation: ClusterSimulation) -> String? {
        if !simulation.members.contains(node) || simulation.nodes[node].engine == nil { move(to: simulation.members[0], simulation) }
        guard let engine = simulation.nodes[node].engine else { return "no member runs" }
        let expiredBefore = counts.expiries
        defer { if counts.expiries > expiredBefore { counts.finalReReads += 1 } }
        paused = 0
        for _ in 0..<10_000 {
            read(limit: 1_000, simulation)
            if let reader, reader.cursor != nil, engine.watchHub === hub, engine.watchHub.held.end == reader.position { break }
        }
        let state = engine.core.withLockedValue { core in (core.node.registry, core.node.rules) }
        let expected = FeedFold(reading: state.0, policy: { state.1.bindingPolicy(of: $0) })
        // Accounts of vendors a move joined are filed under the joined name without events
        // (docs/cluster.md, "Watching changes"): compared only where no move renamed them.
        let aliases = state.0.vendorRuleHistory.aliases.canonical
        var (view, wanted) = (self.view, expected)
        view.bound = view.bound.filter { aliases[$0.key.vendor.name] == nil && !aliases.values.contains($0.key.vendor.name) }
        wanted.bound = wanted.bound.filter { aliases[$0.key.vendor.name] == nil && !aliases.values.contains($0.key.vendor.name) }
        return view.difference(from: wanted)
    }

    private func move(to target: Int, _ simulation: ClusterSimulation) {
        guard simulation.members.contains(target), simulation.nodes[target].engine != nil else { return }
        counts.moves += 1
        let previous = node
        node = target
        if !open(simulation), previous != target {
            // Not caught up: back where it was, which held the cursor.
            node = previous
            _ = open(simulation)
        }
    }

    /// Opens a reader on the node from the cursor; false when the node does not hold it yet.
    @discardableResult
    private func open(_ simulation: ClusterSimulation) -> Bool {
        pending = []
        reader = nil
        guard let engine = simulation.nodes[node].engine else { return false }
        hub = engine.watchHub
        guard let cursor else { return restart(engine) }
        do {
            reader = try engine.watchHub.open(after: cursor, filter: .everything, id: ObjectIdentifier(self), wake: {})
            return true
        } catch .notCaughtUp {
            counts.notCaughtUp += 1
            return false
        } catch {
            counts.expiries += 1
            return restart(engine)
        }
    }

    /// Reads the node's state, as a client whose cursor expired would, and watches from now.
    private func restart(_ engine: RegistryEngine) -> Bool {
        pending = []
        // The feed first, then the state: the state holds at least what the cursor names, and
        // what it holds beyond comes again as events.
        reader = try? engine.watchHub.open(after: nil, filter: .everything, id: ObjectIdentifier(self), wake: {})
        let state = engine.core.withLockedValue { core in (core.node.registry, core.node.rules) }
        view = FeedFold(reading: state.0, policy: { state.1.bindingPolicy(of: $0) })
        cursor = reader?.cursor
        return reader != nil
    }

    private func read(limit: Int, _ simulation: ClusterSimulation) {
        guard let engine = simulation.nodes[node].engine else { return }
        if reader == nil || engine.watchHub !== hub {
            counts.reopened += 1
            guard open(simulation) else { return }
        }
        do {
            let read = try engine.watchHub.read(&reader!, limit: limit, id: ObjectIdentifier(self), wake: {})
            let entries = engine.watchHub.entries(at: read.scan.positions)
            counts.events += entries.count
            pending += entries.map(\.event)
            guard let next = read.scan.cursor else { return }
            for event in pending { view.fold(event) }
            pending = []
            cursor = next
        } catch {
            counts.expiries += 1
            _ = restart(engine)
        }
    }
}
