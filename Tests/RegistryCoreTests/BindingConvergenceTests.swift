import RegistryTestSupport
import Testing
@testable import RegistryCore

/// Replicas that receive one account's binding changes in different orders, with repeats, must
/// agree on its devices, and agree with the rule as written apart from the code under test
/// (`BindingOracle`, in RegistryTestSupport).
@Suite struct BindingConvergenceTests {
    /// One seed: three nodes each accept changes against what they have heard so far (they hear
    /// each other's changes late), some devices merge into others and one is forgotten; then
    /// four replicas receive every accepted change in an order of their own, some twice.
    func run(seed: UInt64, policy: BindingPolicy) {
        var random = SplitMix64(seed: seed)
        let vendor = Vendor(trusted: "com.vendor")
        let account = UUID128(high: 7, low: seed)
        let nodes = ["node-a", "node-b", "node-c"].map { NodeID(trusted: $0) }
        let devices = (1...6).map { DeviceID(UUID128(high: UInt64($0) << 60 | random.next() >> 4, low: random.next())) }
        var canonical = [DeviceID: DeviceID?]()
        canonical[devices[5]] = devices[0]
        canonical[devices[4]] = .some(nil)
        let map: (DeviceID) -> DeviceID? = { canonical[$0] ?? $0 }
        // The merge and the forget reach the deciding nodes half-way through: before that, they
        // accept changes of the two devices as devices of their own.
        let before: (DeviceID) -> DeviceID? = { $0 }

        var heard = Array(repeating: AccountBindings(), count: nodes.count)
        var accepted = [BindingChange]()
        for step in 0..<60 {
            let node = Int(random.next() % 3)
            // Each node hears a random earlier change now and then, late and out of order.
            if !accepted.isEmpty, random.next() % 2 == 0 {
                heard[node].insert(accepted[Int(random.next() % UInt64(accepted.count))])
            }
            // A clock that stands still for a few steps, so that equal HLCs from two nodes occur.
            let millis = 1_000 + UInt64(step / 3) * 40_000_000
            let change = BindingChange(
                kind: random.next() % 4 == 0 ? .unbind : .bind, vendor: vendor, account: account,
                device: devices[Int(random.next() % 6)], time: HLCTimestamp(millis: millis, counter: UInt16(random.next() % 3)),
                origin: nodes[node])
            guard !heard[node].changes.contains(where: { !$0.precedes(change) }) else { continue }
            switch heard[node].decide(change, policy: policy, canonical: step < 30 ? before : map) {
            case .rejected, .notBound: continue
            case .bound, .alreadyBound, .unbound:
                heard[node].insert(change)
                accepted.append(change)
            }
        }

        let want = BindingOracle.expected(accepted, policy: policy, canonical: map)
        for _ in 0..<4 {
            var delivery = accepted + accepted.filter { _ in random.next() % 3 == 0 }
            delivery.shuffle(using: &random)
            var replica = AccountBindings()
            for change in delivery { replica.insert(change) }
            let resolution = replica.resolve(policy: policy, canonical: map)
            #expect(BindingOracle.observed(resolution) == want, "seed \(seed)")
            #expect(replica.changes.count == Set(accepted).count, "seed \(seed)")
        }
    }

    @Test(arguments: 0..<200 as Range<UInt64>)
    func replicasAgreeWithTheWrittenRule(seed: UInt64) throws {
        let policies = [
            BindingPolicy.default,
            try BindingPolicy(maxDevices: 2, pastLimit: .replace),
            try BindingPolicy(maxDevices: 2, activeWithinDays: 1, pastLimit: .reject),
            try BindingPolicy(maxDevices: 3, activeWithinDays: 2, pastLimit: .replace),
        ]
        run(seed: seed, policy: policies[Int(seed % 4)])
    }

    /// A change a node decides to keep does what its answer said, once applied, and the devices
    /// that count never exceed the limit.
    @Test(arguments: 0..<50 as Range<UInt64>)
    func aDecisionIsWhatApplyingDoes(seed: UInt64) throws {
        var random = SplitMix64(seed: seed ^ 0xB14D)
        let days = seed % 2 == 0 ? nil : Int(1 + random.next() % 2)
        let policy = try BindingPolicy(
            maxDevices: 1 + Int(random.next() % 3), activeWithinDays: days, pastLimit: random.next() % 2 == 0 ? .reject : .replace)
        let devices = (1...5).map { DeviceID(UUID128(high: UInt64($0), low: random.next())) }
        var bindings = AccountBindings()
        for step in 0..<40 {
            let device = devices[Int(random.next() % 5)]
            let time = HLCTimestamp(millis: 1 + UInt64(step) * 20_000_000, counter: 0)
            let change = BindingChange(
                kind: random.next() % 4 == 0 ? .unbind : .bind, vendor: Vendor(trusted: "com.v"), account: UUID128(high: 1, low: 1),
                device: device, time: time, origin: NodeID(trusted: "n"))
            let outcome = bindings.decide(change, policy: policy, canonical: { $0 })
            let before = bindings.resolve(policy: policy, canonical: { $0 }).bound.map(\.device)
            bindings.insert(change)
            let now = bindings.resolve(policy: policy, canonical: { $0 }).bound
            let after = now.map(\.device)
            switch outcome {
            case .bound(let replaced):
                #expect(after.contains(device))
                #expect(Set(before).subtracting(after) == Set([replaced].compactMap { $0 }))
                if replaced == nil { #expect(!before.contains(device)) }
            case .alreadyBound, .rejected, .notBound:
                #expect(after == before)
                if case .rejected(let bound) = outcome { #expect(bound.map(\.device) == before) }
            case .unbound:
                #expect(Set(before).subtracting(after) == [device])
            }
            let windowStart = days.map { time.millis > UInt64($0) * 86_400_000 ? time.millis - UInt64($0) * 86_400_000 : 0 } ?? 0
            #expect(now.filter { $0.lastActive.millis >= windowStart }.count <= policy.maxDevices, "seed \(seed)")
        }
    }
}
