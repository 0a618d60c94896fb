import Testing
@testable import RegistryCore

/// The binding rule, case by case: ``AccountBindings`` under each policy, merges, forgotten
/// devices, concurrent binds, and the inputs it refuses.
@Suite struct AccountBindingTests {
    let vendor = Vendor(trusted: "com.vendor")
    let account = UUID128(high: 0xACC0, low: 1)
    let nodeA = NodeID(trusted: "node-a")
    let nodeB = NodeID(trusted: "node-b")
    let d1 = DeviceID(UUID128(high: 1, low: 1))
    let d2 = DeviceID(UUID128(high: 2, low: 2))
    let d3 = DeviceID(UUID128(high: 3, low: 3))

    func change(_ kind: BindingChange.Kind, _ device: DeviceID, at millis: UInt64, on node: NodeID? = nil) -> BindingChange {
        BindingChange(
            kind: kind, vendor: vendor, account: account, device: device,
            time: HLCTimestamp(millis: millis, counter: 0), origin: node ?? nodeA)
    }

    /// Decides a change as the accepting node would, and keeps it when it changes something.
    func accept(_ change: BindingChange, into bindings: inout AccountBindings, policy: BindingPolicy) -> AccountBindings.Outcome {
        let outcome = bindings.decide(change, policy: policy, canonical: { $0 })
        switch outcome {
        case .rejected, .notBound: break
        case .bound, .alreadyBound, .unbound: bindings.insert(change)
        }
        return outcome
    }

    @Test func theDefaultPolicyRejectsASecondDeviceAndNamesTheFirst() {
        var bindings = AccountBindings()
        #expect(accept(change(.bind, d1, at: 10), into: &bindings, policy: .default) == .bound(replaced: nil))
        let refused = accept(change(.bind, d2, at: 20), into: &bindings, policy: .default)
        guard case .rejected(let bound) = refused else {
            Issue.record("expected a rejection, got \(refused)")
            return
        }
        #expect(bound.map(\.device) == [d1])
        #expect(accept(change(.bind, d1, at: 25), into: &bindings, policy: .default) == .alreadyBound)
        #expect(accept(change(.unbind, d1, at: 30), into: &bindings, policy: .default) == .unbound)
        #expect(accept(change(.unbind, d1, at: 35), into: &bindings, policy: .default) == .notBound)
        #expect(accept(change(.bind, d2, at: 40), into: &bindings, policy: .default) == .bound(replaced: nil))
        let resolution = bindings.resolve(policy: .default, canonical: { $0 })
        #expect(resolution.bound.map(\.device) == [d2])
        #expect(resolution.unbound == [UnboundDevice(device: d1, reason: .unbound, time: HLCTimestamp(millis: 30, counter: 0))])
        // The refused and the repeated unbind were not kept.
        #expect(bindings.changes.count == 4)
    }

    @Test func replaceUnbindsTheLeastRecentlyActiveDevice() throws {
        let policy = try BindingPolicy(maxDevices: 2, pastLimit: .replace)
        var bindings = AccountBindings()
        _ = accept(change(.bind, d1, at: 10), into: &bindings, policy: policy)
        _ = accept(change(.bind, d2, at: 20), into: &bindings, policy: policy)
        // d1 logs in again, so d2 is now the least recently active.
        #expect(accept(change(.bind, d1, at: 30), into: &bindings, policy: policy) == .alreadyBound)
        #expect(accept(change(.bind, d3, at: 40), into: &bindings, policy: policy) == .bound(replaced: d2))
        let resolution = bindings.resolve(policy: policy, canonical: { $0 })
        #expect(resolution.bound.map(\.device) == [d1, d3])
        #expect(resolution.bound.first?.lastActive == HLCTimestamp(millis: 30, counter: 0))
        #expect(resolution.unbound.map(\.reason) == [.replaced(by: d3)])
    }

    /// Two nodes that cannot hear each other each accept a bind of the account to another
    /// device. Once each holds both changes, both keep the earlier one and report the other;
    /// earlier by HLC, though the node that made it sorts after the other.
    @Test func concurrentBindsResolveInHLCOrderOnEveryReplica() {
        var onA = AccountBindings()
        var onB = AccountBindings()
        let bindA = change(.bind, d1, at: 12, on: nodeA)
        let bindB = change(.bind, d2, at: 10, on: nodeB)
        #expect(accept(bindA, into: &onA, policy: .default) == .bound(replaced: nil))
        #expect(accept(bindB, into: &onB, policy: .default) == .bound(replaced: nil))
        onA.insert(bindB)
        onB.insert(bindA)
        let resolutionA = onA.resolve(policy: .default, canonical: { $0 })
        #expect(resolutionA == onB.resolve(policy: .default, canonical: { $0 }))
        #expect(resolutionA.bound.map(\.device) == [d2])
        #expect(resolutionA.unbound == [UnboundDevice(device: d1, reason: .refused, time: HLCTimestamp(millis: 12, counter: 0))])
    }

    @Test func equalTimesAreOrderedByOriginNode() {
        let fromB = change(.bind, d1, at: 10, on: nodeB)
        let fromA = change(.bind, d2, at: 10, on: nodeA)
        var bindings = AccountBindings()
        bindings.insert(fromB)
        bindings.insert(fromA)
        #expect(bindings.changes == [fromA, fromB])
        #expect(bindings.resolve(policy: .default, canonical: { $0 }).bound.map(\.device) == [d2])
    }

    @Test func aChangeDeliveredAgainIsKeptOnce() {
        var bindings = AccountBindings()
        let first = bindings.insert(change(.bind, d1, at: 10))
        let again = bindings.insert(change(.bind, d1, at: 10))
        #expect(first && !again)
        #expect(bindings.changes.count == 1)
    }

    /// A merge unions the bindings of the devices it joins: two bound devices found to be one
    /// are one binding, active at the later of their binds, and free a place under the limit.
    @Test func aMergeUnionsBindings() throws {
        let policy = try BindingPolicy(maxDevices: 2)
        var bindings = AccountBindings()
        _ = accept(change(.bind, d1, at: 10), into: &bindings, policy: policy)
        _ = accept(change(.bind, d2, at: 20), into: &bindings, policy: policy)
        let merged: (DeviceID) -> DeviceID? = { [d1, d2] in $0 == d2 ? d1 : $0 }
        let resolution = bindings.resolve(policy: policy, canonical: merged)
        #expect(resolution.bound.map(\.device) == [d1])
        #expect(resolution.bound.first?.lastActive == HLCTimestamp(millis: 20, counter: 0))
        #expect(bindings.decide(change(.bind, d3, at: 30), policy: policy, canonical: merged) == .bound(replaced: nil))
    }

    @Test func aForgottenDeviceLosesItsBindings() {
        var bindings = AccountBindings()
        _ = accept(change(.bind, d1, at: 10), into: &bindings, policy: .default)
        let forgotten: (DeviceID) -> DeviceID? = { [d1] in $0 == d1 ? nil : $0 }
        #expect(bindings.resolve(policy: .default, canonical: forgotten).bound.isEmpty)
        #expect(bindings.decide(change(.bind, d2, at: 20), policy: .default, canonical: forgotten) == .bound(replaced: nil))
        #expect(bindings.decide(change(.bind, d1, at: 20), policy: .default, canonical: forgotten) == .notBound)
    }

    func isRejected(_ outcome: AccountBindings.Outcome) -> Bool {
        if case .rejected = outcome { return true }
        return false
    }

    /// With an activity window, a device not bound again within it takes no place.
    @Test func onlyDevicesActiveWithinTheWindowCount() throws {
        let policy = try BindingPolicy(maxDevices: 1, activeWithinDays: 1)
        let day: UInt64 = 86_400_000
        var bindings = AccountBindings()
        _ = accept(change(.bind, d1, at: day), into: &bindings, policy: policy)
        #expect(isRejected(accept(change(.bind, d2, at: day + day / 2), into: &bindings, policy: policy)))
        #expect(accept(change(.bind, d2, at: 3 * day), into: &bindings, policy: policy) == .bound(replaced: nil))
        #expect(bindings.resolve(policy: policy, canonical: { $0 }).bound.map(\.device) == [d1, d2])
        #expect(isRejected(accept(change(.bind, d3, at: 3 * day + 1), into: &bindings, policy: policy)))
        // d1, bound but outside the window, would count again: it needs a place as a new device does.
        #expect(isRejected(accept(change(.bind, d1, at: 3 * day + 2), into: &bindings, policy: policy)))
        let replacing = try BindingPolicy(maxDevices: 1, activeWithinDays: 1, pastLimit: .replace)
        #expect(bindings.decide(change(.bind, d1, at: 3 * day + 3), policy: replacing, canonical: { $0 }) == .bound(replaced: d2))
        // Within the window, a bind of a counted device only marks it active.
        #expect(accept(change(.bind, d2, at: 3 * day + 4), into: &bindings, policy: policy) == .alreadyBound)
    }

    @Test func accountNamesAreCheckedAndRefusalsSayWhy() throws {
        #expect(try AccountName(validating: "user-42").text == "user-42")
        #expect(try AccountName(validating: String(repeating: "é", count: 128)).text.utf8.count == 256)
        #expect(throws: IdentityError.invalidAccount("an account must not be empty")) { try AccountName(validating: "") }
        for bad in [String(repeating: "a", count: 257), String(repeating: "é", count: 129), "a\0b"] {
            #expect(throws: IdentityError.self) { try AccountName(validating: bad) }
            do {
                _ = try AccountName(validating: bad)
            } catch {
                guard case .invalidAccount = error else {
                    Issue.record("expected invalidAccount, got \(error)")
                    continue
                }
                #expect(error.description.hasPrefix("invalid account: "))
            }
        }
    }

    @Test func policiesOutOfRangeAreRefused() throws {
        for (limit, days) in [(0, nil), (1_001, nil), (-1, nil), (1, 0), (1, 3_651)] as [(Int, Int?)] {
            #expect(throws: IdentityError.self) { try BindingPolicy(maxDevices: limit, activeWithinDays: days) }
        }
        let widest = try BindingPolicy(maxDevices: 1_000, activeWithinDays: 3_650, pastLimit: .replace)
        #expect(widest.maxDevices == 1_000)
        #expect(BindingPolicy.default == (try BindingPolicy(maxDevices: 1)))
    }
}
