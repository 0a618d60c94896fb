import Testing
@testable import RegistryCore

/// The state digest tells replicas apart by content, where counts cannot.
@Suite struct StateDigestTests {
    let vendor = Vendor(trusted: "com.v")
    let bundle = try! BundleID(parsing: "com.v.app")

    func op(_ device: UInt64, created: UInt64, claims: [UInt64], seen: UInt64 = 100) -> RegistrationOp {
        RegistrationOp(
            device: DeviceRef(
                id: DeviceID(UUID128(high: 1, low: device)), created: HLCTimestamp(millis: created, counter: 0),
                origin: NodeID(trusted: "node-a"), vendor: vendor),
            bundle: bundle, claims: IdentifierList(claims.map { Identifier(kind: .idfv, value: UUID128(high: 7, low: $0)) }), merged: [],
            seen: HLCTimestamp(millis: seen, counter: 0))
    }

    /// The report's case: two replicas whose operations named the same slots with other content
    /// hold equal counts of devices, claims and aliases, and different digests.
    @Test func equalCountsWithOtherContentGiveOtherDigests() {
        var a = RegistryState()
        var b = RegistryState()
        a.apply(op(1, created: 10, claims: [1]))
        a.apply(op(2, created: 11, claims: [2]))
        b.apply(op(1, created: 10, claims: [1]))
        b.apply(op(3, created: 11, claims: [3]))
        #expect(a.deviceCount == b.deviceCount && a.claimCount == b.claimCount && a.aliasCount == b.aliasCount)
        #expect(a.digest != b.digest)
        // Once each holds the other's operations too, they agree again.
        a.apply(op(3, created: 11, claims: [3]))
        b.apply(op(2, created: 11, claims: [2]))
        #expect(a.digest == b.digest && a.snapshot() == b.snapshot())
    }

    /// Each kind of fact counts: a later sighting, a merge (who is canonical), and a member.
    @Test func everyKindOfChangeMovesTheDigest() {
        var state = RegistryState()
        #expect(state.digest == 0 && state.recomputedDigest() == 0)
        state.apply(op(1, created: 10, claims: [1]))
        state.apply(op(2, created: 11, claims: [2]))
        var seen = [state.digest]
        state.apply(op(1, created: 10, claims: [], seen: 500))
        seen.append(state.digest)
        // A registration that presents both identifiers merges device 2 into device 1.
        state.apply(op(2, created: 11, claims: [1]))
        #expect(state.aliasCount == 1)
        seen.append(state.digest)
        state.apply(MembershipOp(node: NodeID(trusted: "node-b"), address: "127.0.0.1:1", removed: false, at: HLCTimestamp(millis: 1, counter: 0)))
        seen.append(state.digest)
        state.apply(MembershipOp(node: NodeID(trusted: "node-b"), address: "", removed: true, at: HLCTimestamp(millis: 2, counter: 0)))
        seen.append(state.digest)
        #expect(Set(seen).count == seen.count, "\(seen)")
        #expect(state.digest == state.recomputedDigest())
    }

    /// Names are hashed as text, not as the numbers a replica interned them under: two replicas
    /// that met the same vendors and bundles in another order agree.
    @Test func internOrderDoesNotMatter() {
        let other = Vendor(trusted: "org.w")
        let otherBundle = try! BundleID(parsing: "org.w.app")
        let first = op(1, created: 10, claims: [1])
        let second = RegistrationOp(
            device: DeviceRef(
                id: DeviceID(UUID128(high: 2, low: 2)), created: HLCTimestamp(millis: 12, counter: 0), origin: NodeID(trusted: "node-b"),
                vendor: other),
            bundle: otherBundle, claims: [Identifier(kind: .keychain, value: UUID128(high: 8, low: 8))], merged: [],
            seen: HLCTimestamp(millis: 12, counter: 0))
        var a = RegistryState()
        var b = RegistryState()
        a.apply(first)
        a.apply(second)
        b.apply(second)
        b.apply(first)
        #expect(a.digest == b.digest && a.digest == a.recomputedDigest())
    }
}
