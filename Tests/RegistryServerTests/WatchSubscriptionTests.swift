import RegistryAuth
import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// A watch request's cursor is a client's text: reading it makes no node ID (a node keeps every
/// one it makes, ``InternedText``), and a log of a node this one never heard of is one it does
/// not hold.
@Suite struct WatchSubscriptionTests {
    @Test func aCursorNamingANodeNeverHeardOfMakesNoNodeIDAndIsNotHeld() throws {
        let unheard = "node-unheard-\(UInt64.random(in: 1 ... .max))"
        let heard = try NodeID("node-heard")
        let cursor = WatchCursor(
            clusterID: "c", positions: [LogPosition(origin: unheard, epoch: 2, sequence: 5), LogPosition(origin: heard.value, epoch: 1, sequence: 9)])
        let subscription = try WatchSubscription.make(WatchRequestMessage(cursor: cursor), access: .unrestricted, clusterID: "c").get()
        #expect(InternedText.existing(unheard) == nil)
        let read = try #require(subscription.cursor)
        #expect(read[LogID(origin: heard, epoch: 1)] == 9)
        // Held through the heard log, a node still does not hold the cursor.
        var held = VersionVector()
        held.recordAll(through: 9, in: LogID(origin: heard, epoch: 1))
        #expect(!held.covers(read))
        // A cursor naming no valid log is still refused.
        let invalid = WatchCursor(clusterID: "c", positions: [LogPosition(origin: "Not A Node", epoch: 1, sequence: 1)])
        guard case .failure(let error) = WatchSubscription.make(WatchRequestMessage(cursor: invalid), access: .unrestricted, clusterID: "c") else {
            Issue.record("an invalid cursor was taken")
            return
        }
        #expect(error.code == .invalidCursor)
    }
}
