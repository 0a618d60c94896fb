import Platform
import RegistryCore
import Testing
@testable import RegistryServer

/// What a node far behind a peer sizes its indexes for, from what the peer's hello says.
@Suite struct PeerHoldingsTests {
    let a1 = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let b1 = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)

    func vector(_ sequences: [LogID: UInt64]) -> VersionVector {
        var vector = VersionVector()
        for (log, sequence) in sequences { vector.recordAll(through: sequence, in: log) }
        return vector
    }

    /// An empty node behind a peer of 1M operations sizes for what the peer holds.
    @Test func anEmptyNodeSizesForWhatThePeerHolds() {
        let peer = PeerHoldings(vector: vector([a1: 1_000_000]), deviceRecords: 900_000, claims: 1_700_000)
        let sizing = peer.indexSizing(ownHolds: VersionVector(), ownDeviceRecords: 0, ownClaims: 0)
        #expect(sizing?.deviceRecords == 900_000 && sizing?.claims == 1_700_000)
    }

    /// A node a few operations behind a big peer sizes for no more than those operations add: one
    /// device record and two claims each at most.
    @Test func aNodeSlightlyBehindSizesForWhatItLacksAtMost() {
        let peer = PeerHoldings(vector: vector([a1: 1_000_000, b1: 500]), deviceRecords: 900_000, claims: 1_700_000)
        let own = vector([a1: 999_990, b1: 400])
        let sizing = peer.indexSizing(ownHolds: own, ownDeviceRecords: 899_000, ownClaims: 1_650_000)
        #expect(sizing?.deviceRecords == 899_110 && sizing?.claims == 1_650_220)
    }

    /// Nothing when the node lacks nothing, or already holds as much as the peer.
    @Test func nothingWhenTheNodeIsNotBehind() {
        let peer = PeerHoldings(vector: vector([a1: 50]), deviceRecords: 40, claims: 80)
        #expect(peer.indexSizing(ownHolds: vector([a1: 50, b1: 9]), ownDeviceRecords: 0, ownClaims: 0) == nil)
        #expect(peer.indexSizing(ownHolds: vector([a1: 10]), ownDeviceRecords: 40, ownClaims: 90) == nil)
        // More claims to come, but no more device records: the claims alone.
        let sizing = peer.indexSizing(ownHolds: vector([a1: 10]), ownDeviceRecords: 40, ownClaims: 20)
        #expect(sizing?.deviceRecords == 40 && sizing?.claims == 80)
    }

    /// A hello that claims more than the tables may take reserves tables that fit: a log far
    /// ahead with fake counts had the node map and zero about 74 GB of claim index. Below the
    /// bound the sizing is the peer's.
    @Test func aPeersCountsReserveNoMoreTablesThanTheBoundAllows() throws {
        let peer = PeerHoldings(vector: vector([a1: 1 << 40]), deviceRecords: 1 << 40, claims: 1 << 40)
        let gigabyte = 1 << 30
        let sizing = try #require(peer.indexSizing(ownHolds: VersionVector(), ownDeviceRecords: 10, ownClaims: 20, tableBytes: gigabyte))
        let bytes = RegistryState.indexTableBytes(slots: sizing.deviceRecords, claims: sizing.claims)
        #expect(bytes <= gigabyte && bytes > gigabyte / 4, "\(sizing): \(bytes) bytes")
        #expect(sizing.deviceRecords > 10 && sizing.claims > 20)
        // Unbounded, the reservation is the one the state would cap at slot numbers' range.
        #expect(RegistryState.indexTableBytes(slots: 1 << 40, claims: 1 << 40) > 60 * gigabyte)
        // A bound the node's own tables already pass: nothing.
        #expect(peer.indexSizing(ownHolds: VersionVector(), ownDeviceRecords: 10, ownClaims: 20, tableBytes: 1) == nil)
        // A peer that fits is sized for as before.
        let small = PeerHoldings(vector: vector([a1: 1_000_000]), deviceRecords: 900_000, claims: 1_700_000)
        let fitting = small.indexSizing(ownHolds: VersionVector(), ownDeviceRecords: 0, ownClaims: 0, tableBytes: gigabyte)
        #expect(fitting?.deviceRecords == 900_000 && fitting?.claims == 1_700_000)
    }

    /// The bound's memory is the control group's limit where there is one, as a container's
    /// files write it, and the machine's otherwise.
    @Test func theMemoryBoundReadsAControlGroupsLimit() {
        #expect(MachineMemory.cgroupLimit("8589934592\n") == 8_589_934_592)
        #expect(MachineMemory.cgroupLimit("max\n") == nil)
        #expect(MachineMemory.cgroupLimit("") == nil && MachineMemory.cgroupLimit("12 GB") == nil)
        #expect(MachineMemory.usableBytes <= MachineMemory.physicalBytes && MachineMemory.usableBytes > 0)
    }

    /// Counts and vectors at the top of their range saturate instead of wrapping.
    @Test func hugeFiguresSaturate() {
        let peer = PeerHoldings(vector: vector([a1: .max, b1: .max]), deviceRecords: .max, claims: .max)
        let sizing = peer.indexSizing(ownHolds: VersionVector(), ownDeviceRecords: 5, ownClaims: 7)
        #expect(sizing?.deviceRecords == Int.max && sizing?.claims == Int.max)
    }
}
