import Foundation
import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Whole clusters in one process over simulated disks and a simulated network, one per seed,
/// with drops, duplicates, reordering and delays, partitions and heals, crashes that tear what
/// was not synced, a wiped node, a backup put back, keychain-only registrations and races, and
/// clocks that are skewed and jump backwards, across restarts too. After healing and
/// going quiet, every invariant of the cluster model (docs/cluster.md) is checked, and the whole state (winners, each
/// device's creation, claim owners, apps) against an oracle computed from the operations alone.
///
/// `SIM_SEEDS=N` runs N seeds (default 500); `SIM_SEED=S` replays seed S alone; `SIM_TRACE=1`
/// prints each seed's counts, which two runs must repeat exactly; `SIM_STEPS=1` prints what each
/// node holds and how many disk changes it made after every step, to find where two runs part.
/// A failure names its seed.
@Suite(.serialized, .offThePool) struct ClusterSimulationTests {
    static let seeds: [UInt64] = {
        let environment = ProcessInfo.processInfo.environment
        if let one = environment["SIM_SEED"].flatMap(UInt64.init) { return [one] }
        let count = environment["SIM_SEEDS"].flatMap(Int.init) ?? 500
        return (1...UInt64(count)).map { $0 }
    }()

    /// The seeds in groups of 25, a test case each: they run one at a time (`.serialized`), on a
    /// thread of their own (`.offThePool`), leaving the other core to the rest of the tests.
    static let groups: [[UInt64]] = stride(from: 0, to: seeds.count, by: 25).map { Array(seeds[$0..<min($0 + 25, seeds.count)]) }

    /// A seed replays exactly, also after other seeds ran in the same process: a run of seeds,
    /// among them those whose counts once changed from run to run (a learned removal, a freed
    /// snapshot intake, or a start's vendor seed commit, that the next step raced), run twice,
    /// must count the same both times.
    @Test func aSeedReplaysExactly() throws {
        let seeds = Array(1...25 as ClosedRange<UInt64>) + [48, 162, 306, 363]
        let first = try seeds.map { try Self.run(seed: $0).cluster }
        let second = try seeds.map { try Self.run(seed: $0).cluster }
        for (index, seed) in seeds.enumerated() { #expect(first[index] == second[index], "seed \(seed)") }
    }

    @Test(arguments: groups) func everySeedConvergesToTheRulesState(seeds: [UInt64]) throws {
        var total = ClusterSimulation.Counts()
        var watched = SimulatedWatcher.Counts()
        let traced = ProcessInfo.processInfo.environment["SIM_TRACE"] != nil
        for seed in seeds {
            let (counts, watcher) = try Self.run(seed: seed)
            if traced || ProcessInfo.processInfo.environment["SIM_WATCH"] != nil { print("seed \(seed): \(watcher)") }
            total.add(counts)
            watched.add(watcher)
        }
        print(
            "simulated seeds \(seeds.first!)...\(seeds.last!): \(total.registrations) registrations, \(total.siblingRaces) sibling races "
                + "(\(total.splitRaces) split), \(total.crashes) crashes, \(total.partitions) partitions, \(total.wipes) wipes, "
                + "\(total.skews) clock changes, \(total.removals) members removed, \(total.restores) backups restored, "
                + "\(total.liveRemovals) removed while running (\(total.refusedAsRemoved) writes they refused), "
                + "\(total.diskCrashes) deaths at a disk change (\(total.installCrashes) inside an install), \(total.batchesApplied) batches applied, \(total.refusals) refusals, "
                + "\(total.snapshotsTaken) snapshots taken, \(total.snapshotsInstalled) installed from a peer, "
                + "\(total.batchesFromMemory) batches sent from memory and \(total.batchesFromJournal) from journals, "
                + "\(total.dropped) messages of closed connections dropped, \(total.binds) binds and \(total.unbinds) unbinds "
                + "(\(total.bindsRejected) binds rejected, \(total.unbindsOfNothing) unbinds of nothing), "
                + "\(total.forgets) forgets (\(total.forgetsOfGone) of devices gone already, refused: \(total.forgetErrors); "
                + "\(total.heldForForgottenDevices) registrations held for a forgotten device not yet received), "
                + "\(total.vendorChanges) vendor rule changes (\(total.moves) joining vendors; \(total.vendorRetries) asked again; refused: \(total.vendorErrors)), "
                + "\(total.cloneScenarios) keychains cloned onto a second phone (\(total.clonesLogged) clone operations logged); "
                + "a watcher read \(watched.events) events, moved \(watched.moves) times (\(watched.notCaughtUp) to a node not caught up), "
                + "reopened \(watched.reopened) readers and read the state again \(watched.expiries) times "
                + "(\(watched.finalReReads) of them in the final catch-up)")
        // Every kind of fault happened (a group holding a single replayed seed may lack some).
        if seeds.count >= 25 {
            #expect(total.crashes > 0 && total.partitions > 0 && total.wipes > 0 && total.skews > 0 && total.refusals > 0)
            #expect(total.siblingRaces > 0 && total.dropped > 0 && total.removals > 0)
            #expect(total.snapshotsTaken > 0 && total.snapshotsInstalled > 0)
            #expect(total.diskCrashes > 0 && total.installCrashes > 0 && total.liveRemovals > 0 && total.refusedAsRemoved > 0)
            #expect(total.batchesFromMemory > 0 && total.batchesFromJournal > 0)
            #expect(total.binds > 0 && total.unbinds > 0 && total.bindsRejected > 0)
            #expect(total.forgets > 0 && total.vendorChanges > 0 && total.moves > 0)
            #expect(total.cloneScenarios > 0 && total.clonesLogged > 0)
            #expect(watched.events > 0 && watched.moves > 0 && watched.expiries > 0 && watched.reopened > 0)
            // Most seeds end with a view made of events, not one read from the state at the end.
            #expect(watched.finalReReads * 4 < seeds.count, "\(watched.finalReReads) of \(seeds.count) seeds read the state again at the end")
        }
    }

    /// One seed: a faulty phase, then healing, then the checks.
    static func run(seed: UInt64) throws -> (cluster: ClusterSimulation.Counts, watcher: SimulatedWatcher.Counts) {
        let simulation = try ClusterSimulation(seed: seed)
        let watcher = SimulatedWatcher(seed: seed)
        var random = SplitMix64(seed: seed &* 0x9E37_79B9)
        let faults = SimulatedNetwork.Faults(
            drop: seed % 3 == 0 ? 15 : 0, duplicate: seed % 4 == 0 ? 20 : 0, maxExtraDelayMillis: seed % 2 == 0 ? 40 : 3)
        simulation.setFaults(faults)
        var crashed: Int?
        var isolated = false
        var wiped = false
        for _ in 0..<200 {
            let roll = Int.random(in: 0..<100, using: &random)
            let node = simulation.members.randomElement(using: &random)!
            switch roll {
            case 0..<40: simulation.randomRegistration()
            case 72..<80: simulation.randomBinding()
            case 80..<82: simulation.randomForget()
            case 82..<86: simulation.randomVendorChange()
            case 86..<88: simulation.keychainClone()
            case 40..<46: simulation.siblingRace()
            case 46..<48 where crashed == nil:
                simulation.crash(node)
                crashed = node
            case 68..<70 where crashed == nil:
                // The process dies inside a commit: at one of the disk changes of a registration's
                // write (the journal write, its sync), or, when the write needs fewer, later.
                simulation.armDiskFailure(node, after: Int.random(in: 0..<3, using: &random))
                simulation.randomRegistration(at: node)
                simulation.disarmDiskFailure(node)
            case 48..<52 where crashed != nil:
                // Sometimes the clock comes back from the restart far behind the one it ran on
                // (a clock that ran ahead, then was set right): the node's persisted clock leads.
                if Int.random(in: 0..<3, using: &random) == 0 { simulation.setSkew(crashed!, -20_000) }
                try simulation.restart(crashed!)
                crashed = nil
            case 52..<54 where !isolated:
                simulation.isolate(node)
                isolated = true
            case 54..<57 where isolated:
                simulation.healAll()
                isolated = false
            case 57 where !wiped && crashed == nil && seed % 3 == 0:
                // Only what reached a peer survives a lost disk (acknowledged with --ack-replicas 0):
                // let everything replicate first.
                try quiesce(simulation, faults: faults)
                isolated = false
                // Most often the others have trimmed their journals by then (a file goes once
                // both kept snapshots cover it): the node must start from a peer's snapshot.
                if seed % 2 == 0 {
                    for other in simulation.members where other != node {
                        try simulation.snapshot(other)
                        try simulation.snapshot(other)
                    }
                }
                try simulation.wipe(node)
                wiped = true
                // The wiped node dies inside installing the snapshot it catches up from, when it needs one.
                if seed % 2 == 0 { simulation.crashDuringNextInstall(node) }
            case 61 where simulation.removed.isEmpty && crashed == nil && seed % 7 == 0:
                // Only what reached a peer survives the node: let everything replicate first.
                try quiesce(simulation, faults: faults)
                isolated = false
                simulation.remove(node, via: simulation.members.first { $0 != node }!)
            case 70..<72 where simulation.removed.isEmpty && crashed == nil && seed % 7 == 3:
                // A member removed while it runs (with force): what it acknowledged before must
                // reach a peer first, as when it is down; it keeps running meanwhile.
                try quiesce(simulation, faults: faults)
                isolated = false
                simulation.removeLive(node, via: simulation.members.first { $0 != node }!)
            case 62..<66:
                try simulation.snapshot(node)
            case 66 where crashed == nil:
                simulation.backUp(node)
            case 67 where crashed == nil && seed % 2 == 1:
                // A backup put back (or a disk rolled back): what the node wrote since must reach
                // a peer first, as with a wipe, since only the peers hold it afterwards.
                try quiesce(simulation, faults: faults)
                isolated = false
                try simulation.restoreBackup(node)
            case 58..<61:
                // Up to 20 s behind (a jump backwards) or up to 8 s ahead, past the 5 s allowed.
                simulation.setSkew(node, Int64.random(in: -20_000...8_000, using: &random))
            default:
                break
            }
            simulation.advance(by: UInt64.random(in: 1...25, using: &random))
            simulation.retryRefusedVendorChange()
            if ProcessInfo.processInfo.environment["SIM_STEPS"] != nil { print("step \(roll): \(simulation.stepTrace)") }
            watcher.step(simulation)
            // A node that died at a disk change is the one down, to be restarted.
            if crashed == nil { crashed = simulation.members.first { simulation.nodes[$0].engine == nil } }
        }
        for node in simulation.members where simulation.nodes[node].engine == nil { try simulation.restart(node) }
        try quiesce(simulation, faults: .none, watcher: watcher)
        try check(simulation)
        try simulation.countClones()
        // What the watcher made of the events it read, against the node it ends on.
        if let problem = watcher.finish(simulation) { throw SimulationFailure(seed: seed, reason: "the watcher: \(problem)") }
        return (simulation.counts, watcher.counts)
    }

    /// Heals everything, sets clocks right, and runs until every node holds the same.
    static func quiesce(_ simulation: ClusterSimulation, faults: SimulatedNetwork.Faults, watcher: SimulatedWatcher? = nil) throws {
        simulation.setFaults(.none)
        simulation.healAll()
        for index in simulation.nodes.indices where simulation.nodes[index].skew != 0 { simulation.setSkew(index, 0) }
        var steps = 0
        while !simulation.isQuiet {
            // A node that died at a disk change meanwhile (inside an install, say) is restarted,
            // as its supervisor would.
            for index in simulation.members where simulation.nodes[index].engine == nil { try simulation.restart(index) }
            simulation.advance(by: 20)
            watcher?.step(simulation)
            steps += 1
            guard steps < 5_000 else {
                throw SimulationFailure(
                    seed: simulation.seed,
                    reason: "no quiet after 100 s: \(simulation.nodes.map { $0.engine?.durableVector.description ?? "down" }) \(simulation.linkReport)")
            }
        }
        simulation.setFaults(faults)
    }

    struct SimulationFailure: Error, CustomStringConvertible {
        let seed: UInt64
        let reason: String
        var description: String { "seed \(seed): \(reason) (replay with SIM_SEED=\(seed))" }
    }

    /// The invariants of the cluster model (docs/cluster.md), on a healed and quiet cluster.
    static func check(_ simulation: ClusterSimulation) throws {
        let seed = simulation.seed
        let engines = simulation.members.compactMap { simulation.nodes[$0].engine }
        // A member removed while it ran refused every write once it knew.
        if let first = simulation.acknowledgedAsRemoved.first { throw SimulationFailure(seed: seed, reason: first) }
        // Every vendor change was decided on a node that held what every other member held as
        // it arrived (CatchUpBarrier).
        if let first = simulation.decidedBehind.first { throw SimulationFailure(seed: seed, reason: first) }
        // Every remaining node holds the removal.
        for index in simulation.removed {
            for engine in engines where engine.members[simulation.nodes[index].name]?.removed != true {
                throw SimulationFailure(seed: seed, reason: "\(engine.nodeID) does not hold the removal of \(simulation.nodes[index].name)")
            }
        }
        // Every node holds the same operations and the same content, by the digest each keeps
        // as it goes; and that digest is the one its content gives when hashed from nothing.
        let stats = engines.map { $0.stats() }
        for node in stats.dropFirst() where node.versionVector != stats[0].versionVector || node.stateDigest != stats[0].stateDigest {
            throw SimulationFailure(
                seed: seed, reason: "\(node.nodeID) and \(stats[0].nodeID) hold \(node.versionVector) and \(stats[0].versionVector), digests \(node.stateDigest) and \(stats[0].stateDigest)")
        }
        for engine in engines where engine.withState({ $0.digest != $0.recomputedDigest() }) {
            throw SimulationFailure(seed: seed, reason: "\(engine.nodeID)'s kept digest differs from its content's")
        }
        let states = engines.map { $0.withState { $0.snapshot() } }
        // Every node holds identical canonical state.
        for state in states.dropFirst() where state != states[0] {
            throw SimulationFailure(seed: seed, reason: "two nodes hold different states")
        }
        // The winners are the ones the written rule names, from the operations alone.
        // Vendors that moves joined are one: the oracle files claims by what it makes of the moves.
        let vendorChanges = try simulation.allOperations().compactMap { logged -> VendorRuleChange? in
            if case .vendorRule(let change) = logged.operation { return change }
            return nil
        }
        let wantedAliases = VendorRuleOracle.aliases(vendorChanges)
        let expected = ExpectedCanonical(try simulation.allOperations(), aliases: wantedAliases)
        for (id, canonical) in states[0].canonical where expected.canonical[id.uuid] != canonical.uuid {
            throw SimulationFailure(
                seed: seed, reason: "\(id) resolves to \(canonical); the rule names \(String(describing: expected.canonical[id.uuid]))")
        }
        // Full state, from the operations alone: each device's own creation (aliases included)
        // and each claim's owner.
        guard states[0].devices.count == expected.canonical.count else {
            throw SimulationFailure(seed: seed, reason: "the nodes hold \(states[0].devices.count) devices; the operations name \(expected.canonical.count)")
        }
        for (id, device) in states[0].devices {
            guard let creation = expected.creation[id.uuid], creation.created == device.ref.created.rawValue, creation.origin == device.ref.origin.value else {
                throw SimulationFailure(
                    seed: seed, reason: "\(id) was created at \(device.ref.created) by \(device.ref.origin); the operations say \(String(describing: expected.creation[id.uuid]))")
            }
        }
        // Each canonical device's apps: the earliest and latest sighting of each bundle.
        for (root, record) in states[0].records {
            let held = Dictionary(uniqueKeysWithValues: record.apps.map { ($0.bundle.value, "\($0.firstSeen.rawValue)-\($0.lastSeen.rawValue)") })
            let wanted = (expected.apps[root.uuid] ?? [:]).mapValues { "\($0.first)-\($0.last)" }
            guard held == wanted else {
                throw SimulationFailure(seed: seed, reason: "\(root) holds apps \(held); the operations say \(wanted)")
            }
        }
        guard states[0].claims.count == expected.owner.count else {
            throw SimulationFailure(seed: seed, reason: "the nodes hold \(states[0].claims.count) claims; the operations make \(expected.owner.count)")
        }
        for (claim, owner) in states[0].claims {
            let key = ExpectedCanonical.key(vendor: claim.vendor, identifier: claim.identifier)
            guard expected.owner[key] == owner.uuid else {
                throw SimulationFailure(seed: seed, reason: "\(claim) is owned by \(owner); the rule names \(String(describing: expected.owner[key]))")
            }
        }
        // Gone: exactly the merge sets holding a device a forget named, and every acknowledged
        // forget among them.
        for (id, _) in states[0].devices where states[0].gone.contains(id) != expected.gone.contains(id.uuid) {
            throw SimulationFailure(seed: seed, reason: "\(id) is \(states[0].gone.contains(id) ? "" : "not ")gone; the operations say otherwise")
        }
        for forget in simulation.acknowledgedForgets where !states[0].gone.contains(forget.device) {
            throw SimulationFailure(seed: seed, reason: "acknowledged forget of \(forget.device) is not held: the device is not gone")
        }
        // A split keeps the later IDFV's device apart from the device it was split from, and
        // moves the later IDFV's lookups there; the keychain it contested still leads to its
        // claim's owner, wherever registrations that present it with an IDFV go.
        let splits = try simulation.allOperations().compactMap { logged -> CloneOp? in
            if case .clone(let op) = logged.operation, op.action == .split { return op }
            return nil
        }
        let splitDevices = Set(splits.flatMap { [$0.device.id.uuid, $0.newDevice!.id.uuid] }.compactMap { expected.canonical[$0] })
        // Contested keychain claims, by value (a claim in a generation past a forget is a derived
        // value: the simulation's few forgets reach no generation past 16).
        let contested = Set(splits.compactMap { $0.keychain?.value })
        func isContested(_ identifier: Identifier) -> Bool {
            identifier.kind == .keychain && (0...16).contains { contested.contains(identifier.atGeneration($0).value) }
        }
        for split in splits where !expected.gone.contains(split.device.id.uuid) {
            guard expected.canonical[split.device.id.uuid] != expected.canonical[split.newDevice!.id.uuid] else {
                throw SimulationFailure(seed: seed, reason: "the split of \(split.device.id) was joined again with \(split.newDevice!.id)")
            }
        }
        for engine in engines {
            let failure = engine.withState { state -> String? in
                for acknowledged in simulation.acknowledged {
                    let sealed = engine.identifierKey.seal(acknowledged.identifier)
                    if expected.gone.contains(acknowledged.device.uuid) {
                        // Forgotten: its identifier is released, or claimed again by a device
                        // that is not gone.
                        if let found = state.lookup(vendor: acknowledged.vendor, identifier: sealed)?.device.id, expected.gone.contains(found.uuid) {
                            return "\(acknowledged.identifier) leads to \(found), which the operations say is gone"
                        }
                        continue
                    }
                    // Every acknowledged device still resolves, and its identifier leads to the same device.
                    guard let canonical = state.canonical(of: acknowledged.device) else {
                        return "acknowledged \(acknowledged.device) no longer resolves"
                    }
                    // Aliases are one hop: a canonical device is its own.
                    guard state.canonical(of: canonical) == canonical else {
                        return "\(acknowledged.device) is more than one hop from its canonical device"
                    }
                    // A split moved the later IDFV, and contested the keychain: its registrations
                    // name the device they resolved to then (checked above).
                    if splitDevices.contains(canonical.uuid) || isContested(sealed) { continue }
                    // The state holds identifiers as the node's keyed hashes.
                    let found = state.lookup(vendor: acknowledged.vendor, identifier: sealed)?.device.id
                    guard found == canonical else {
                        return "\(acknowledged.identifier) leads to \(String(describing: found)), its acknowledged device to \(canonical)"
                    }
                }
                return nil
            }
            if let failure { throw SimulationFailure(seed: seed, reason: failure) }
        }
        try checkBindings(simulation, engines: engines, expected: expected)
        // A bind or an unbind is refused only for a device the node has not heard of yet or has
        // forgotten, by a removed member, or by a node whose clock ran ahead.
        let expectedRefusals: Set<String> = ["not_found", "not_a_member", "clock_skew", "gone"]
        if let unexpected = simulation.counts.bindingErrors.keys.first(where: { !expectedRefusals.contains($0) }) {
            throw SimulationFailure(seed: seed, reason: "a bind or an unbind was refused with \(unexpected)")
        }
        // The vendor rules every node applies are what the rule, written apart, makes of every
        // vendor rule change logged (the seeds of every start included), and so are the vendors
        // moves joined.
        let wantedRules = VendorRuleOracle.rules(vendorChanges)
        for engine in engines {
            // The rules the node registers and binds with, not only those its history makes.
            let (applied, aliases) = engine.core.withLockedValue { core -> ([VendorRule], [String: String]) in
                core.node.refreshRules()
                return (core.node.rules.rules, core.node.rules.aliases.canonical)
            }
            guard applied == wantedRules else {
                throw SimulationFailure(seed: seed, reason: "\(engine.nodeID) applies vendor rules \(applied); the rule makes \(wantedRules)")
            }
            guard aliases == wantedAliases else {
                throw SimulationFailure(seed: seed, reason: "\(engine.nodeID) files moved vendors as \(aliases); the rule makes \(wantedAliases)")
            }
        }
        guard wantedRules.contains(where: { $0.prefixes.contains("com.sim") }) == (simulation.vendorRules.rules.contains { $0.prefixes.contains("com.sim") }) else {
            throw SimulationFailure(seed: seed, reason: "the seed of the first start is not the configured rules: \(wantedRules)")
        }
        // A vendor rule change is refused only when its vendor has a rule already (add) or none
        // (set, remove), by a removed member, by a node whose clock ran ahead, or by a node that
        // has not caught up with every other member (CatchUpBarrier); or it is not answered, by a
        // node that died while it waited.
        let expectedVendorRefusals: Set<String> = [
            "invalid_argument", "not_found", "not_a_member", "clock_skew", "unavailable", "no answer: the node died",
        ]
        if let unexpected = simulation.counts.vendorErrors.keys.first(where: { !expectedVendorRefusals.contains($0) }) {
            throw SimulationFailure(seed: seed, reason: "a vendor rule change was refused with \(unexpected)")
        }
        // A forget is refused only for a device the node has not heard of yet (or heard of only
        // as forgotten), or by a node whose clock ran ahead.
        let expectedForgetRefusals: Set<String> = ["not_found", "gone", "clock_skew"]
        if let unexpected = simulation.counts.forgetErrors.keys.first(where: { !expectedForgetRefusals.contains($0) }) {
            throw SimulationFailure(seed: seed, reason: "a forget was refused with \(unexpected)")
        }
        guard simulation.counts.splitRaces == 0 else {
            throw SimulationFailure(seed: seed, reason: "\(simulation.counts.splitRaces) sibling races were told two IDs")
        }
    }
}

extension ClusterSimulationTests {
    /// Every acknowledged bind and unbind is held by every node, and every account's devices on
    /// every node are what the rule, written apart (`BindingOracle`), makes of every binding
    /// operation logged, with each device taken to the canonical device `expected` computed from
    /// the operations alone; and they keep within the vendor's limit.
    static func checkBindings(_ simulation: ClusterSimulation, engines: [RegistryEngine], expected: ExpectedCanonical) throws {
        let seed = simulation.seed
        var logged = [AccountKey: [BindingChange]]()
        for operation in try simulation.allOperations() {
            guard case .binding(let change) = operation.operation else { continue }
            // Changes naming a forgotten device are not kept.
            if expected.gone.contains(change.device.uuid) || expected.tombstones.contains(change.device.uuid) { continue }
            logged[AccountKey(vendor: change.vendor, account: change.account), default: []].append(change)
        }
        let oracleCanonical = { (device: DeviceID) in expected.canonical[device.uuid].map(DeviceID.init) }
        for engine in engines {
            let failure = engine.withState { state -> String? in
                // A forgotten device's changes are removed.
                for binding in simulation.acknowledgedBindings where !expected.gone.contains(binding.device.uuid) && !expected.tombstones.contains(binding.device.uuid) {
                    let key = AccountKey(
                        vendor: Vendor(trusted: "com.sim"), account: engine.identifierKey.seal(try! AccountName(validating: binding.account)))
                    let held = state.bindings(of: key)?.changes.contains {
                        $0.kind == binding.kind && $0.device == binding.device && $0.time.millis == binding.millis
                    }
                    guard held == true else {
                        return "\(engine.nodeID) lost an acknowledged \(binding.kind) of \(binding.account) to \(binding.device) at \(binding.millis)"
                    }
                }
                guard state.bindingChangeCount == logged.values.reduce(0, { $0 + Set($1).count }) else {
                    return "\(engine.nodeID) holds \(state.bindingChangeCount) binding changes; the operations make \(logged.values.reduce(0) { $0 + Set($1).count })"
                }
                for (key, changes) in logged {
                    let policy = simulation.bindingPolicy
                    let want = BindingOracle.expected(changes, policy: policy, canonical: oracleCanonical)
                    guard let held = state.bindings(of: key) else { return "\(engine.nodeID) holds no changes of \(key)" }
                    let got = BindingOracle.observed(held.resolve(policy: policy) { state.canonical(of: $0) })
                    guard got == want else { return "\(engine.nodeID) resolves \(key) to \(got); the rule, from the operations, to \(want)" }
                    guard got.bound.count <= policy.maxDevices else { return "\(key) holds \(got.bound.count) devices, past \(policy.maxDevices)" }
                }
                return nil
            }
            if let failure { throw SimulationFailure(seed: seed, reason: failure) }
        }
    }
}

extension ClusterSimulation.Counts {
    mutating func add(_ other: Self) {
        binds += other.binds
        unbinds += other.unbinds
        bindsRejected += other.bindsRejected
        unbindsOfNothing += other.unbindsOfNothing
        bindingErrors.merge(other.bindingErrors, uniquingKeysWith: +)
        forgets += other.forgets
        forgetsOfGone += other.forgetsOfGone
        heldForForgottenDevices += other.heldForForgottenDevices
        forgetErrors.merge(other.forgetErrors, uniquingKeysWith: +)
        vendorChanges += other.vendorChanges
        vendorRetries += other.vendorRetries
        cloneScenarios += other.cloneScenarios
        clonesLogged += other.clonesLogged
        moves += other.moves
        removalsRefused.merge(other.removalsRefused, uniquingKeysWith: +)
        vendorErrors.merge(other.vendorErrors, uniquingKeysWith: +)
        registrations += other.registrations
        siblingRaces += other.siblingRaces
        splitRaces += other.splitRaces
        crashes += other.crashes
        partitions += other.partitions
        wipes += other.wipes
        skews += other.skews
        removals += other.removals
        restores += other.restores
        diskCrashes += other.diskCrashes
        liveRemovals += other.liveRemovals
        refusedAsRemoved += other.refusedAsRemoved
        installCrashes += other.installCrashes
        snapshotsTaken += other.snapshotsTaken
        snapshotsInstalled += other.snapshotsInstalled
        batchesApplied += other.batchesApplied
        refusals += other.refusals
        dropped += other.dropped
        batchesFromMemory += other.batchesFromMemory
        batchesFromJournal += other.batchesFromJournal
    }
}

extension RegistryEngine {
    /// Reads the registry state under the engine's lock (it blocks requests for as long as `body` runs).
    func withState<Result>(_ body: (RegistryState) -> Result) -> Result {
        core.withLockedValue { body($0.node.registry) }
    }
}
