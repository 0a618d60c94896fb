import Testing
@testable import RegistryCore

/// Operations as three nodes make them when they register, bind and forget against their own
/// states and hear of each other's operations only now and then: registrations race forgets,
/// re-registrations claim later generations, binds name devices that are later forgotten.
struct ForgetConvergenceWorkload {
    private(set) var operations: [Operation] = []
    /// Registrations that claimed a generation above 0 (a derived claim).
    private(set) var laterGenerations = 0

    init(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let rules = try! VendorRules()
        let key = MintingKey(secret: "seed \(seed)")
        let nodes = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        var states = Array(repeating: RegistryState(), count: 3)
        var clocks = Array(repeating: HybridLogicalClock(), count: 3)
        let identifiers = (0..<8).map { _ in UUID128(high: random.next() | 1, low: random.next()) }
        let generation0 = Set(identifiers)
        for step in 0..<160 {
            let node = Int(random.next() % 3)
            let now = clocks[node].tick(wallMillis: UInt64(1_000 + step / 8))
            let roll = random.next() % 10
            let operation: Operation
            if roll < 6 || states[node].deviceCount == 0 {
                let presented = ConvergenceWorkloads.presented(from: identifiers, using: &random)
                let registration = try! Registration(bundle: ["com.v.a", "com.v.b"][Int(random.next() % 2)], identifiers: presented, rules: rules)
                let op = states[node].register(registration, at: now, origin: nodes[node]) { generation in
                    DeviceID.new(for: registration, at: now, generation: generation, key: key, using: &random)
                }.operation
                if op.claims.contains(where: { !generation0.contains($0.value) }) { laterGenerations += 1 }
                operation = .registration(op)
            } else {
                let known = states[node].snapshot().devices.keys.sorted()
                let device = known[Int(random.next() % UInt64(known.count))]
                if roll < 8 {
                    operation = .binding(
                        BindingChange(
                            kind: random.next() % 4 == 0 ? .unbind : .bind, vendor: Vendor(trusted: "com.v"),
                            account: UUID128(high: 0xACC, low: random.next() % 3), device: device, time: now, origin: nodes[node]))
                } else {
                    operation = .forget(ForgetOp(device: states[node].canonical(of: device)!, vendor: Vendor(trusted: "com.v")))
                }
                states[node].apply(operation)
            }
            operations.append(operation)
            ConvergenceWorkloads.hearSomething(&states, of: operations, using: &random)
        }
    }
}

/// Which devices are gone, and which binding changes stay, worked out from the operations alone,
/// apart from `RegistryState`: merge sets are the components of "claimed the same (vendor, kind,
/// value)" and "named merged by one operation"; a set is gone when it holds a device a forget
/// named; a binding change stays unless its device is a forgotten ID or in a gone set.
struct GoneOracle {
    private(set) var gone: Set<DeviceID> = []
    private(set) var keptBindings: Set<BindingChange> = []

    init(_ operations: [Operation]) {
        var parent = [DeviceID: DeviceID]()
        func find(_ id: DeviceID) -> DeviceID {
            var id = id
            while let next = parent[id], next != id { id = next }
            return id
        }
        func add(_ id: DeviceID) { if parent[id] == nil { parent[id] = id } }
        func connect(_ a: DeviceID, _ b: DeviceID) {
            let (x, y) = (find(a), find(b))
            if x != y { parent[x] = y }
        }
        var firstClaimant = [String: DeviceID]()
        var named = Set<DeviceID>()
        var changes = [BindingChange]()
        for operation in operations {
            switch operation {
            case .registration(let op):
                add(op.device.id)
                for claim in op.claims {
                    let key = "\(op.device.vendor.name)|\(claim.kind.rawValue)|\(claim.value.high)|\(claim.value.low)"
                    if let first = firstClaimant[key] { connect(first, op.device.id) } else { firstClaimant[key] = op.device.id }
                }
                for other in op.merged {
                    add(other.id)
                    connect(op.device.id, other.id)
                }
            case .forget(let op): named.insert(op.device)
            case .binding(let change): changes.append(change)
            case .membership, .vendorRule, .clone: break
            }
        }
        let goneRoots = Set(named.filter { parent[$0] != nil }.map(find))
        gone = Set(parent.keys.filter { goneRoots.contains(find($0)) })
        keptBindings = Set(changes.filter { !named.contains($0.device) && !gone.contains($0.device) })
    }
}

@Suite struct ForgetConvergenceTests {
    @Test func forgetsConvergeInEveryOrderToTheGoneSetsTheOperationsName() throws {
        var laterGenerations = 0
        var goneDevices = 0
        var racedIntoGoneSets = 0
        for seed in UInt64(1)...120 {
            let workload = ForgetConvergenceWorkload(seed: seed)
            let operations = workload.operations
            laterGenerations += workload.laterGenerations
            let oracle = GoneOracle(operations)
            goneDevices += oracle.gone.count
            var reference = RegistryState()
            for operation in operations { reference.apply(operation) }
            let expected = reference.snapshot()
            #expect(expected.gone == oracle.gone, "seed \(seed): gone devices differ from the rule's")
            #expect(expected.bindings == oracle.keptBindings, "seed \(seed): binding changes kept differ from the rule's")
            #expect(reference.digest == reference.recomputedDigest(), "seed \(seed)")
            for (id, record) in expected.records where expected.gone.contains(id) {
                #expect(record.apps.isEmpty, "seed \(seed): gone \(id) keeps apps")
            }
            // A device created by a registration that a node accepted before it heard of a
            // forget, and merged into the forgotten set.
            racedIntoGoneSets += expected.gone.filter { !expected.tombstones.contains($0) }.count
            var random = SplitMix64(seed: seed &* 77)
            for _ in 0..<3 {
                var shuffled = operations + operations.prefix(Int(random.next() % 20))
                shuffled.shuffle(using: &random)
                var replica = RegistryState()
                for operation in shuffled { replica.apply(operation) }
                #expect(replica.snapshot() == expected, "seed \(seed): a delivery order changed the state")
                #expect(replica.digest == reference.digest, "seed \(seed): a delivery order changed the digest")
            }
        }
        #expect(laterGenerations > 0, "some registrations should claim a later generation")
        #expect(goneDevices > 0 && racedIntoGoneSets > 0, "forgets should bury devices, some merged in after the forget")
    }
}
