import RegistryCore
import Testing
@testable import RegistryServer

/// Writes that wait for peers: answered once enough peers hold them, or at their deadline.
@Suite struct ReplicaAcknowledgementsTests {
    let b = NodeID(trusted: "node-b")
    let c = NodeID(trusted: "node-c")

    @Test func aWriteIsReleasedOnceEnoughPeersHoldItAndNotBefore() {
        var waits = ReplicaAcknowledgements<String>()
        #expect(waits.wait("w5", through: 5, needed: 2, deadlineMillis: 100) == nil)
        #expect(waits.wait("w9", through: 9, needed: 1, deadlineMillis: 100) == nil)
        #expect(waits.peer(b, holdsThrough: 6) == [])
        #expect(waits.peer(b, holdsThrough: 4) == [], "positions only grow")
        #expect(waits.peer(c, holdsThrough: 9) == ["w5", "w9"])
        #expect(waits.waiting == 0)
        // Peers already hold it: answered at once.
        #expect(waits.wait("w7", through: 7, needed: 1, deadlineMillis: 100) == "w7")
    }

    @Test func aWriteWithoutEnoughPeersExpiresAtItsDeadline() {
        var waits = ReplicaAcknowledgements<String>()
        _ = waits.wait("early", through: 3, needed: 2, deadlineMillis: 100)
        _ = waits.wait("late", through: 4, needed: 2, deadlineMillis: 200)
        _ = waits.peer(b, holdsThrough: 10)
        #expect(waits.expired(nowMillis: 99) == [])
        #expect(waits.expired(nowMillis: 150) == ["early"])
        #expect(waits.peer(c, holdsThrough: 10) == ["late"])
    }

    @Test func aPeerThatLostItsDataNoLongerCountsForWhatItHeld() {
        var waits = ReplicaAcknowledgements<String>()
        _ = waits.peer(b, holdsThrough: 50)
        // Wiped, it welcomes this node holding nothing of its log.
        _ = waits.peer(b, holdsThrough: 0, restated: true)
        #expect(waits.wait("w", through: 40, needed: 1, deadlineMillis: 100) == nil)
        #expect(waits.peer(b, holdsThrough: 40) == ["w"])
    }
}
