import RegistryTestSupport
import Synchronization
import Testing
@testable import RegistryCore

/// The feed's positions, batches and floor, and a reader's cursor, directed.
@Suite struct ChangeFeedTests {
    let a = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let b = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)

    func vector(_ pairs: (LogID, UInt64)...) -> VersionVector {
        var vector = VersionVector()
        for (log, sequence) in pairs { vector.raise(to: sequence, in: log) }
        return vector
    }

    func entry(_ log: LogID, _ sequence: UInt64, vendor: String = "com.v") -> FeedEntry {
        FeedEntry(
            log: log, sequence: sequence, time: HLCTimestamp(rawValue: sequence << 16),
            event: .created(device: DeviceID(UUID128(high: sequence, low: UInt64(log.origin.value.count))), vendor: Vendor(trusted: vendor)))
    }

    @Test func aCursorResumesAtTheLastBatchWhoseStartItCovers() {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        feed.publish([entry(a, 1)], through: vector((a, 1)))
        feed.publish([entry(b, 1), entry(a, 2)], through: vector((a, 2), (b, 1)))
        feed.publish([entry(a, 3)], through: vector((a, 3), (b, 1)))
        #expect(feed.start(after: VersionVector()) == 0)
        #expect(feed.start(after: vector((a, 1))) == 1)
        // Covers a:2 but not b:1: the second batch came after a:1 only, so it is read again.
        #expect(feed.start(after: vector((a, 2))) == 1)
        #expect(feed.start(after: vector((a, 2), (b, 1))) == 3)
        #expect(feed.start(after: vector((a, 9), (b, 9))) == 3)
    }

    @Test func readersReadAlikeOnlyWithOneCursorAtOnePosition() throws {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        feed.publish([entry(a, 1)], through: vector((a, 1)))
        feed.publish([entry(b, 1), entry(a, 2)], through: vector((a, 2), (b, 1)))
        // Both resume at the second batch; the second cursor, another node's, covers a:2 too.
        var first = try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything)
        var second = try FeedReader(feed: feed, after: vector((a, 2)), filter: .everything)
        var third = try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything)
        #expect(first.position == second.position)
        #expect(!first.readsAlike(second) && first.readsAlike(third))
        #expect(!first.readsAlike(try FeedReader(feed: feed, after: vector((a, 1)), filter: FeedFilter(vendors: ["com.v"]))))
        // Readers alike read alike, and stay alike.
        let scans = try (first.scan(feed, limit: 1), third.scan(feed, limit: 1))
        #expect(scans.0 == scans.1 && first.readsAlike(third))
        _ = try second.scan(feed, limit: 1)
        #expect(!first.readsAlike(second))
    }

    @Test func droppingABatchRaisesTheFloorAndExpiresTheCursorsBelowIt() {
        var feed = ChangeFeed(capacity: 2, holding: vector((a, 5)))
        #expect(feed.start(after: VersionVector()) == nil, "a cursor that does not cover the start is expired")
        feed.publish([entry(a, 6)], through: vector((a, 6)))
        feed.publish([entry(a, 7), entry(b, 1)], through: vector((a, 7), (b, 1)))
        #expect(feed.firstPosition == 1 && feed.count == 2)
        #expect(feed.floor == vector((a, 6)))
        #expect(feed.start(after: vector((a, 5))) == nil)
        #expect(feed.start(after: vector((a, 6))) == 1)
        // A batch bigger than the capacity is kept alone.
        feed.publish([entry(a, 8), entry(a, 9), entry(a, 10)], through: vector((a, 10), (b, 1)))
        #expect(feed.count == 3 && feed.floor == vector((a, 7), (b, 1)))
    }

    @Test func aReaderFiltersRaisesItsCursorAndIsToldWhenItFellBehindTheFloor() throws {
        var feed = ChangeFeed(capacity: 3, holding: VersionVector())
        var reader = try FeedReader(feed: feed, after: VersionVector(), filter: FeedFilter(vendors: ["com.x"]))
        #expect(reader.cursor == VersionVector())
        feed.publish([entry(a, 1), entry(a, 2, vendor: "com.x")], through: vector((a, 2)))
        let read = try reader.read(feed, limit: 10)
        #expect(read.entries.map(\.sequence) == [2])
        #expect(reader.cursor == vector((a, 2)) && reader.isCaughtUp(in: feed))
        // Operations without events raise the cursor of a reader that is caught up.
        feed.publish([], through: vector((a, 4)))
        #expect(try reader.read(feed, limit: 10).entries.isEmpty)
        #expect(reader.cursor == vector((a, 4)))
        feed.publish([entry(a, 5)], through: vector((a, 5)))
        feed.publish([entry(a, 6), entry(a, 7), entry(a, 8)], through: vector((a, 8)))
        #expect(throws: FeedReadError.expired(floor: vector((a, 5)))) { try reader.read(feed, limit: 10) }
        #expect(throws: FeedReadError.expired(floor: vector((a, 5)))) {
            try FeedReader(feed: feed, after: vector((a, 4)), filter: .everything)
        }
        var fromNow = try FeedReader(feed: feed, after: nil, filter: .everything)
        #expect(fromNow.cursor == vector((a, 8)) && fromNow.position == feed.endPosition)
        #expect(try fromNow.read(feed, limit: 1).entries.isEmpty)
    }

    /// One operation may give more events than a frame carries (a vendor's binding-policy change
    /// states every account): a read stops at its limit inside it, and the cursor then covers only
    /// the operations before it, so that a watcher resuming from that cursor is given the whole
    /// operation again. Before, a read took every event of the operation, however many.
    @Test func aReadStopsInsideAnOperationWithMoreEventsThanItsLimitAndTheCursorWaitsForItsEnd() throws {
        var feed = ChangeFeed(capacity: 10_000, holding: VersionVector())
        var reader = try FeedReader(feed: feed, after: VersionVector(), filter: .everything)
        feed.publish([entry(a, 1)], through: vector((a, 1)))
        let big = (0..<1_000).map { index in
            FeedEntry(
                log: b, sequence: 1, time: HLCTimestamp(rawValue: 1 << 16),
                event: .created(device: DeviceID(UUID128(high: 7, low: UInt64(index))), vendor: Vendor(trusted: "com.v")))
        }
        feed.publish(big, through: vector((a, 1), (b, 1)))
        feed.publish([entry(a, 2)], through: vector((a, 2), (b, 1)))
        var read = [FeedEntry]()
        var cursors = [VersionVector?]()
        while !reader.isCaughtUp(in: feed) {
            let batch = try reader.read(feed, limit: 256)
            #expect(batch.entries.count <= 256)
            read += batch.entries
            cursors.append(batch.cursor)
        }
        #expect(read == [entry(a, 1)] + big + [entry(a, 2)])
        // 1 + 1,000 + 1 events, 256 a read: the cursor passes the big operation with the last.
        #expect(cursors == [vector((a, 1)), vector((a, 1)), vector((a, 1)), vector((a, 2), (b, 1))])
        // Resumed from a cursor given inside the operation: all of its events again.
        var resumed = try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything)
        var again = [FeedEntry]()
        while !resumed.isCaughtUp(in: feed) { again += try resumed.read(feed, limit: 256).entries }
        #expect(again.filter { $0.log == b } == big)
    }

    @Test func aReaderThatResumesGivesNoCursorUntilItIsPastWhatTheNodeHeldAndNeedsTheNodeToHoldItsCursor() throws {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        feed.publish([entry(b, 1)], through: vector((b, 1)))
        #expect(throws: FeedReadError.notCaughtUp(held: vector((b, 1)))) { try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything) }
        feed.publish([entry(a, 1), entry(a, 2)], through: vector((a, 2), (b, 1)))
        var reader = try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything)
        #expect(reader.position == 0 && reader.cursor == nil)
        #expect(try reader.read(feed, limit: 2) == FeedBatch(entries: [entry(b, 1), entry(a, 1)], positions: [0, 1], cursor: nil))
        #expect(try reader.read(feed, limit: 2) == FeedBatch(entries: [entry(a, 2)], positions: [2], cursor: vector((a, 2), (b, 1))))
    }

    /// A cursor from another node that this node held long ago: the events after the batch from
    /// which it held the cursor come with cursors as a watcher's that never moved would, rather
    /// than all in one span without one up to the feed's end.
    @Test func aResumedReaderGivesCursorsFromTheBatchAfterWhichTheNodeHeldItsCursor() throws {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        feed.publish([entry(b, 1)], through: vector((b, 1)))
        feed.publish([entry(a, 1)], through: vector((a, 1), (b, 1)))
        for sequence in UInt64(2)...6 { feed.publish([entry(a, sequence)], through: vector((a, sequence), (b, 1))) }
        // Node a's cursor holds a:1 and not b:1: it resumes at the start, and this node held it
        // from the third batch on.
        #expect(feed.heldPosition(of: vector((a, 1))) == 2)
        var reader = try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything)
        #expect(reader.position == 0 && reader.resumedThrough == 2)
        #expect(try reader.read(feed, limit: 1).cursor == nil)
        #expect(try reader.read(feed, limit: 1) == FeedBatch(entries: [entry(a, 1)], positions: [1], cursor: vector((a, 1), (b, 1))))
        #expect(try reader.read(feed, limit: 2) == FeedBatch(entries: [entry(a, 2), entry(a, 3)], positions: [2, 3], cursor: vector((a, 3), (b, 1))))
        // A cursor the node held exactly: no span at all.
        #expect(try FeedReader(feed: feed, after: vector((a, 4), (b, 1)), filter: .everything).cursor == vector((a, 4), (b, 1)))
    }

    @Test func aRestartedFeedExpiresEveryReaderOfTheStateBeforeCaughtUpOrNot() throws {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        feed.publish([entry(a, 1)], through: vector((a, 1)))
        var caughtUp = try FeedReader(feed: feed, after: nil, filter: .everything)
        var behind = try FeedReader(feed: feed, after: VersionVector(), filter: .everything)
        // A peer's snapshot holding a:5 and b:3 replaces the state: nothing of the jump is an event.
        feed.restart(holding: vector((a, 5), (b, 3)))
        #expect(throws: FeedReadError.expired(floor: vector((a, 5), (b, 3)))) { try caughtUp.read(feed, limit: 10) }
        #expect(throws: FeedReadError.expired(floor: vector((a, 5), (b, 3)))) { try behind.read(feed, limit: 10) }
        #expect(throws: FeedReadError.expired(floor: vector((a, 5), (b, 3)))) { try FeedReader(feed: feed, after: vector((a, 1)), filter: .everything) }
        feed.publish([entry(a, 6)], through: vector((a, 6), (b, 3)))
        var resumed = try FeedReader(feed: feed, after: vector((a, 5), (b, 3)), filter: .everything)
        #expect(try resumed.read(feed, limit: 10).entries == [entry(a, 6)])
    }

    @Test func aFilterMatchesKindsAndVendorsAndAForgetWithoutVendorOnlyWhenAllAreWanted() {
        let forget = FeedEvent.forgotten(devices: [DeviceID(UUID128(high: 1, low: 1))], vendor: nil)
        #expect(FeedFilter.everything.matches(forget))
        #expect(!FeedFilter(vendors: ["com.v"]).matches(forget))
        #expect(!FeedFilter(kinds: [.created]).matches(forget))
        #expect(FeedFilter(kinds: [.forgotten]).matches(forget))
        #expect(FeedEventKind(name: "Merged") == .merged && FeedEventKind(name: "clone") == nil)
    }
}

/// What the state records as it applies operations, directed.
@Suite struct FeedRecordingTests {
    let rules = try! VendorRules()
    let node = NodeID(trusted: "node-a")

    func register(_ state: inout RegistryState, _ bundle: String, keychain: UInt64? = nil, idfv: UInt64? = nil, at millis: UInt64) -> RegistrationOp {
        var presented = [PresentedIdentifier]()
        if let keychain { presented.append(PresentedIdentifier(rawKind: 1, text: UUID128(high: keychain, low: 1).text)) }
        if let idfv { presented.append(PresentedIdentifier(rawKind: 2, text: UUID128(high: idfv, low: 2).text)) }
        let registration = try! Registration(bundle: bundle, identifiers: presented, rules: rules)
        var random = SplitMix64(seed: millis)
        return state.register(registration, at: HLCTimestamp(rawValue: millis << 16), origin: node) { _ in DeviceID.mint(at: HLCTimestamp(rawValue: millis << 16), using: &random) }.operation
    }

    @Test func createdMergedBoundUnboundAndForgottenAreRecordedAsTheyHappen() {
        var state = RegistryState()
        state.recordEvents(configuredRules: [])
        let first = register(&state, "com.v.a", keychain: 1, at: 10)
        #expect(state.takeEvents() == [.created(device: first.device.id, vendor: Vendor(trusted: "com.v"))])
        #expect(state.takeEvents().isEmpty, "taken once")
        _ = register(&state, "com.v.b", keychain: 1, at: 11)
        #expect(state.takeEvents().isEmpty, "a sibling app on a known device changes no device")

        // A second device, then a registration that presents both: merged.
        let second = register(&state, "com.v.a", keychain: 2, at: 12)
        _ = state.takeEvents()
        let account = UUID128(high: 0xACC, low: 1)
        let key = AccountKey(vendor: Vendor(trusted: "com.v"), account: account)
        state.apply(BindingChange(kind: .bind, vendor: Vendor(trusted: "com.v"), account: account, device: second.device.id, time: HLCTimestamp(rawValue: 13 << 16), origin: node))
        #expect(state.takeEvents() == [.bound(account: key, device: second.device.id, bound: [second.device.id])])
        _ = register(&state, "com.v.a", keychain: 1, idfv: 9, at: 14)
        _ = state.takeEvents()
        let merging = RegistrationOp(device: first.device, bundle: first.bundle, claims: [], merged: [second.device], seen: HLCTimestamp(rawValue: 15 << 16))
        state.apply(merging)
        let winner = state.canonical(of: second.device.id)!
        let loser = winner == first.device.id ? second.device.id : first.device.id
        let events = state.takeEvents()
        #expect(events.first == .merged(winner: winner, replaced: [loser], vendor: Vendor(trusted: "com.v")))
        // The account was bound to the loser: it is bound to the winner now.
        // The account was bound to one of them: it is bound to the winner now.
        #expect(events.dropFirst().contains(.bound(account: key, device: winner, bound: [winner])))

        state.apply(BindingChange(kind: .unbind, vendor: Vendor(trusted: "com.v"), account: account, device: winner, time: HLCTimestamp(rawValue: 16 << 16), origin: node))
        #expect(state.takeEvents() == [.unbound(account: key, device: winner, reason: .unbound, bound: [])])
        // An unbind of a device never bound here is reported too: its bind may be elsewhere.
        state.apply(BindingChange(kind: .unbind, vendor: Vendor(trusted: "com.v"), account: account, device: winner, time: HLCTimestamp(rawValue: 17 << 16), origin: node))
        #expect(state.takeEvents() == [.unbound(account: key, device: winner, reason: .unbound, bound: [])])

        state.apply(ForgetOp(device: winner, vendor: Vendor(trusted: "com.v")))
        // The account's changes of the forgotten device go: it hears its devices again, then the forget.
        #expect(
            state.takeEvents() == [
                .unbound(account: key, device: winner, reason: .unbound, bound: []),
                .forgotten(devices: [winner, loser], vendor: Vendor(trusted: "com.v")),
            ])
        let unknown = DeviceID(UUID128(high: 77, low: 77))
        state.apply(ForgetOp(device: unknown, vendor: Vendor(trusted: "com.v")))
        #expect(state.takeEvents() == [.forgotten(devices: [unknown], vendor: nil)])
    }

    /// A node's way with one operation: apply it, stage its events as operation `sequence` of
    /// log `a`; `publish` then publishes what is staged.
    struct RecordingNode {
        var state = RegistryState()
        var staging = FeedStaging()
        var feed = ChangeFeed(capacity: 1_000, holding: VersionVector())
        var sequence: UInt64 = 0
        let log = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)

        init(rules: [VendorRule] = []) { state.recordEvents(configuredRules: rules) }

        mutating func apply(_ operation: Operation) {
            sequence += 1
            state.apply(operation)
            state.moveEvents(to: &staging, log: log, sequence: sequence, time: HLCTimestamp(rawValue: sequence << 16))
        }

        mutating func publish() -> [UInt64] {
            var vector = VersionVector()
            vector.raise(to: sequence, in: log)
            return feed.publish(staging.takeAll(), through: vector)
        }
    }

    @Test func aForgetErasesTheEarlierAccountEventsOfItsDevicesAndAFoldStillEndsAtTheNode() throws {
        let vendor = Vendor(trusted: "com.v")
        var scratch = RegistryState()
        let (forgotten, kept) = (register(&scratch, "com.v.a", keychain: 1, at: 10), register(&scratch, "com.v.a", keychain: 2, at: 11))
        func change(_ kind: BindingChange.Kind, _ account: UInt64, _ device: DeviceID, at millis: UInt64) -> Operation {
            .binding(
                BindingChange(
                    kind: kind, vendor: vendor, account: UUID128(high: 0xACC, low: account), device: device, time: HLCTimestamp(rawValue: millis << 16),
                    origin: node))
        }
        func account(_ number: UInt64) -> AccountKey { AccountKey(vendor: vendor, account: UUID128(high: 0xACC, low: number)) }
        var replica = RecordingNode()
        replica.apply(.registration(forgotten))
        replica.apply(.registration(kept))
        // Accounts 1 and 3 on the device to forget, account 2 on the other.
        for operation in [change(.bind, 1, forgotten.device.id, at: 20), change(.bind, 2, kept.device.id, at: 21), change(.bind, 3, forgotten.device.id, at: 22)] {
            replica.apply(operation)
        }
        #expect(replica.publish().isEmpty)
        // In the forget's commit: account 1 unbound from the device and bound to the other.
        replica.apply(change(.unbind, 1, forgotten.device.id, at: 23))
        replica.apply(change(.bind, 1, kept.device.id, at: 24))
        let copy = replica.feed
        replica.apply(.forget(ForgetOp(device: forgotten.device.id, vendor: vendor)))
        let erased = replica.publish()

        let held = (replica.feed.firstPosition..<replica.feed.endPosition).map { replica.feed[$0] }
        let forgetSequence = replica.sequence
        // Every account event before the forget that named the device is erased, in its place.
        for (position, entry) in zip(replica.feed.firstPosition..., held) where entry.sequence < forgetSequence {
            #expect(!entry.event.namesAccount(with: [forgotten.device.id]), "an earlier event still names the device: \(entry.event)")
            #expect((entry.event == .erased) == erased.contains(position))
        }
        #expect(erased.count == 3, "account 1's bind and unbind, account 3's bind: \(erased)")
        #expect(erased.allSatisfy { replica.feed[$0].sequence < forgetSequence })
        // The forget's own events, and the others', stay.
        #expect(held.contains { $0.event == .bound(account: account(2), device: kept.device.id, bound: [kept.device.id]) })
        #expect(held.contains { $0.sequence == forgetSequence && $0.event == .forgotten(devices: [forgotten.device.id], vendor: vendor) })
        #expect(held.contains { $0.sequence == forgetSequence && $0.event.namesAccount(with: [forgotten.device.id]) }, "the forget states account 3")
        // A copy of the feed taken before the forget keeps what it held.
        #expect(erased.filter { $0 < copy.endPosition }.allSatisfy { copy[$0].event != .erased })

        // A watcher that reads it all from the start, two events at a time, ends at the node.
        var reader = try FeedReader(feed: replica.feed, after: VersionVector(), filter: .everything)
        var fold = FeedFold()
        while !reader.isCaughtUp(in: replica.feed) {
            for entry in try reader.read(replica.feed, limit: 2).entries { fold.fold(entry.event) }
        }
        let nodeView = FeedFold(reading: replica.state)
        #expect(fold.difference(from: nodeView) == nil)
        #expect(nodeView.bound[account(1)] == [kept.device.id] && nodeView.bound[account(3)] == nil)
    }

    /// A second forget of one merge set (another of its devices) buries it again, and states no
    /// account: the binds went with the first. What the first forget said of the accounts stays.
    @Test func aSecondForgetOfAGoneSetErasesNothingTheFirstSaid() throws {
        let vendor = Vendor(trusted: "com.v")
        let policy = try BindingPolicy(maxDevices: 2)
        var scratch = RegistryState()
        let (forgotten, other, alias) = (
            register(&scratch, "com.v.a", keychain: 1, at: 10), register(&scratch, "com.v.a", keychain: 2, at: 11),
            register(&scratch, "com.v.a", keychain: 3, at: 12)
        )
        let account = AccountKey(vendor: vendor, account: UUID128(high: 0xACC, low: 1))
        func change(_ kind: BindingChange.Kind, _ device: DeviceID, at millis: UInt64) -> Operation {
            .binding(BindingChange(kind: kind, vendor: vendor, account: account.account, device: device, time: HLCTimestamp(rawValue: millis << 16), origin: node))
        }
        var replica = RecordingNode(rules: [try VendorRule(name: "com.v", prefixes: ["com.v"], binding: policy)])
        for op in [forgotten, other, alias] { replica.apply(.registration(op)) }
        replica.apply(.registration(RegistrationOp(device: forgotten.device, bundle: forgotten.bundle, claims: [], merged: [alias.device], seen: HLCTimestamp(rawValue: 13 << 16))))
        // Bound to both, then unbound from the other: the account's last event names the set.
        for operation in [change(.bind, other.device.id, at: 20), change(.bind, forgotten.device.id, at: 21), change(.unbind, other.device.id, at: 22)] {
            replica.apply(operation)
        }
        _ = replica.publish()
        replica.apply(.forget(ForgetOp(device: forgotten.device.id, vendor: vendor)))
        #expect(!replica.publish().isEmpty)
        let said = (replica.feed.firstPosition..<replica.feed.endPosition).filter { replica.feed[$0].sequence == replica.sequence && replica.feed[$0].event.namesAccount(with: [forgotten.device.id]) }
        #expect(!said.isEmpty, "the first forget states the account")
        replica.apply(.forget(ForgetOp(device: alias.device.id, vendor: vendor)))
        #expect(replica.publish().isEmpty, "the second forget erased what the first said")
        #expect(said.allSatisfy { replica.feed[$0].event != .erased })

        var reader = try FeedReader(feed: replica.feed, after: VersionVector(), filter: .everything)
        var fold = FeedFold()
        while !reader.isCaughtUp(in: replica.feed) {
            for entry in try reader.read(replica.feed, limit: 3).entries { fold.fold(entry.event) }
        }
        #expect(fold.difference(from: FeedFold(reading: replica.state, policy: { _ in policy })) == nil)
    }

    /// A vendor move files an account under the joined vendor's name, without events: a forget
    /// after it states the account under the new name, and erases its earlier events under the
    /// old one too.
    @Test func aForgetAfterAVendorMoveErasesTheAccountsEventsUnderItsOldVendor() throws {
        var scratch = RegistryState()
        let device = register(&scratch, "com.a.mail", keychain: 1, at: 10)
        let old = AccountKey(vendor: Vendor(trusted: "com.a"), account: UUID128(high: 0xACC, low: 7))
        var replica = RecordingNode()
        replica.apply(.registration(device))
        replica.apply(.binding(BindingChange(kind: .bind, vendor: old.vendor, account: old.account, device: device.device.id, time: HLCTimestamp(rawValue: 20 << 16), origin: node)))
        _ = replica.publish()
        let bound = try #require((replica.feed.firstPosition..<replica.feed.endPosition).first { replica.feed[$0].event.namesAccount(with: [device.device.id]) })
        replica.apply(
            .vendorRule(
                VendorRuleChange(
                    kind: .set, name: "ab", rule: try VendorRule(name: "ab", prefixes: ["com.a", "com.b"]), time: HLCTimestamp(rawValue: 30 << 16),
                    origin: node, move: VendorMove(from: ["com.a", "com.b"], into: "ab"))))
        _ = replica.publish()
        replica.apply(.forget(ForgetOp(device: device.device.id, vendor: Vendor(trusted: "ab"))))
        let erased = replica.publish()
        #expect(erased == [bound] && replica.feed[bound].event == .erased)
        let restated = (replica.feed.firstPosition..<replica.feed.endPosition).map { replica.feed[$0].event }.contains {
            if case .unbound(let account, _, _, _) = $0 { return account.vendor.name == "ab" }
            return false
        }
        #expect(restated, "the forget states the account under the joined vendor")
    }

    @Test func aBindThatArrivesBeforeItsDeviceIsReportedWhenTheDeviceArrives() {
        var origin = RegistryState()
        let op = register(&origin, "com.v.a", keychain: 5, at: 20)
        var replica = RegistryState()
        replica.recordEvents(configuredRules: [])
        let account = UUID128(high: 0xACC, low: 2)
        let key = AccountKey(vendor: Vendor(trusted: "com.v"), account: account)
        replica.apply(BindingChange(kind: .bind, vendor: Vendor(trusted: "com.v"), account: account, device: op.device.id, time: HLCTimestamp(rawValue: 21 << 16), origin: node))
        // Not bound here yet: the device is unknown.
        #expect(replica.takeEvents() == [.unbound(account: key, device: op.device.id, reason: .unbound, bound: [])])
        replica.apply(op)
        #expect(
            replica.takeEvents() == [
                .created(device: op.device.id, vendor: Vendor(trusted: "com.v")),
                .bound(account: key, device: op.device.id, bound: [op.device.id]),
            ])
    }

    @Test func aStateThatDoesNotRecordKeepsNothing() {
        var state = RegistryState()
        _ = register(&state, "com.v.a", keychain: 1, at: 10)
        #expect(!state.recordsEvents && state.takeEvents().isEmpty)
    }
}

/// The feed's pages across their boundaries.
@Suite struct FeedPagesTests {
    func entry(_ sequence: UInt64) -> FeedEntry {
        FeedEntry(
            log: LogID(origin: NodeID(trusted: "node-a"), epoch: 1), sequence: sequence, time: HLCTimestamp(rawValue: sequence),
            event: .forgotten(devices: [], vendor: nil))
    }

    /// An entry replaced in a page a copy shares (not the last: appending copies that one)
    /// leaves the copy's entry as it was.
    @Test func aReplacedEntryOfAPageACopySharesStaysInTheCopy() {
        var pages = FeedPages()
        pages.append(contentsOf: (1...5_000).map(entry))
        let copy = pages
        let erased = FeedEntry(log: entry(10).log, sequence: 10, time: entry(10).time, event: .erased)
        pages.replace(at: 9, with: erased)
        #expect(pages[9] == erased && copy[9] == entry(10))
        #expect((0..<5_000).allSatisfy { $0 == 9 || pages[$0] == copy[$0] })
        // Replaced again, now in a page of its own: in place.
        pages.replace(at: 10, with: erased)
        #expect(pages[10] == erased && copy[10] == entry(11))
    }

    @Test func theAccountIndexDropsTheOldPositionsOnceTheyMayOutnumberTheRest() {
        var index = AccountEventIndex()
        let (one, two) = (AccountKey(vendor: Vendor(trusted: "com.v"), account: UUID128(high: 1, low: 1)), AccountKey(vendor: Vendor(trusted: "com.v"), account: UUID128(high: 2, low: 2)))
        for position in UInt64(0)..<2_000 { index.add(position % 3 == 0 ? one : two, at: position) }
        #expect(index.positions(of: one, from: 1_990, before: 2_000) == [1_992, 1_995, 1_998])
        #expect(index.positions(of: two, from: 0, before: 5) == [1, 2, 4])
        index.dropBelow(1_000)
        // Fewer than twice the base (1,024 at first): all kept, the caller's range still applies.
        #expect(index.heldCount == 2_000 && index.positions(of: one, from: 0, before: 3) == [0])
        for position in UInt64(2_000)..<2_100 { index.add(position % 3 == 0 ? one : two, at: position) }
        index.dropBelow(1_000)
        #expect(index.positions(of: one, from: 0, before: 1_010) == [1_002, 1_005, 1_008])
        #expect(index.positions(of: two, from: 2_095, before: 2_100) == [2_095, 2_096, 2_098, 2_099])
        #expect(index.heldCount == 1_100)
    }

    @Test func eventsStayInOrderAcrossPagesAsTheOldestAreDropped() {
        var pages = FeedPages()
        pages.append(contentsOf: (1...10_000).map(entry))
        #expect(pages.count == 10_000 && pages[0] == entry(1) && pages[4_095] == entry(4_096) && pages[4_096] == entry(4_097))
        pages.dropFirst(5_000)
        #expect(pages.count == 5_000 && pages[0] == entry(5_001) && pages[4_999] == entry(10_000))
        pages.append(contentsOf: (10_001...12_000).map(entry))
        #expect((0..<pages.count).allSatisfy { pages[$0] == entry(UInt64(5_001 + $0)) })
        pages.dropFirst(pages.count)
        #expect(pages.count == 0)
        pages.append(contentsOf: [entry(12_001)])
        #expect(pages.count == 1 && pages[0] == entry(12_001))
    }

    @Test func aFeedThatRollsOnThroughManyPagesKeepsItsOrder() {
        // As a full feed does: each commit's events in, the oldest out.
        var pages = FeedPages()
        var next: UInt64 = 1
        var oldest: UInt64 = 1
        for round in 0..<12 {
            let added = 1_000 + round * 700
            pages.append(contentsOf: (next..<next + UInt64(added)).map(entry))
            next += UInt64(added)
            let dropped = pages.count > 6_000 ? pages.count - 6_000 : 0
            pages.dropFirst(dropped)
            oldest += UInt64(dropped)
            #expect(pages.count == Int(next - oldest))
            #expect((0..<pages.count).allSatisfy { pages[$0] == entry(oldest + UInt64($0)) })
        }
    }
    /// A copy of the feed's pages reads what it held, whatever the original does next (it shares
    /// their pages, and neither writes to a page the other holds).
    @Test func aCopyKeepsItsEventsWhileTheOriginalAppendsAndDrops() {
        var pages = FeedPages()
        pages.append(contentsOf: (1...5_000).map(entry))
        var copy = pages
        pages.append(contentsOf: (5_001...9_000).map(entry))
        pages.dropFirst(8_000)
        pages.append(contentsOf: (9_001...20_000).map(entry))
        #expect(copy.count == 5_000 && (0..<copy.count).allSatisfy { copy[$0] == entry(UInt64(1 + $0)) })
        #expect(pages.count == 12_000 && (0..<pages.count).allSatisfy { pages[$0] == entry(UInt64(8_001 + $0)) })
        // The copy writes too: into a page of its own, not into the one the original filled on.
        copy.append(contentsOf: (30_001...30_010).map(entry))
        #expect(copy.count == 5_010 && copy[4_999] == entry(5_000) && copy[5_000] == entry(30_001))
        #expect(pages[0] == entry(8_001) && pages[11_999] == entry(20_000))
        pages.removeAll()
        #expect(copy[0] == entry(1) && copy[5_009] == entry(30_010))
    }

    /// A copy made while pages wait for reuse shares them with the original: each must write
    /// into a page of its own, never into one the other took.
    @Test func copiesThatShareKeptPagesTakeNoneTheOtherTook() {
        var pages = FeedPages()
        pages.append(contentsOf: (1...5_000).map(entry))
        pages.dropFirst(4_096)
        var copy = pages
        // Each fills its shared last page's rest and starts another, from the kept pages.
        pages.append(contentsOf: (5_001...9_000).map(entry))
        copy.append(contentsOf: (10_001...14_000).map(entry))
        #expect(pages.count == 4_904 && (0..<pages.count).allSatisfy { pages[$0] == entry(UInt64(4_097 + $0)) })
        #expect(copy.count == 4_904 && (0..<904).allSatisfy { copy[$0] == entry(UInt64(4_097 + $0)) })
        #expect((904..<copy.count).allSatisfy { copy[$0] == entry(UInt64(10_001 - 904 + $0)) })
        // And on past another page each.
        pages.append(contentsOf: (20_001...25_000).map(entry))
        copy.append(contentsOf: (30_001...35_000).map(entry))
        #expect(pages[4_904] == entry(20_001) && pages[pages.count - 1] == entry(25_000) && pages[903] == entry(5_000))
        #expect(copy[4_904] == entry(30_001) && copy[copy.count - 1] == entry(35_000) && copy[904] == entry(10_001))
    }

    /// A rolling feed takes its pages from the ones it dropped: the memory it asks for stays
    /// near its size, however many events pass through it.
    @Test func aRollingFeedReusesTheBlocksOfThePagesItDropped() {
        let allocator = CountingAllocator()
        var pages = FeedPages(allocator: allocator)
        var next: UInt64 = 1
        for _ in 0..<40 {
            pages.append(contentsOf: (next..<next + 2_000).map(entry))
            next += 2_000
            if pages.count > 6_000 { pages.dropFirst(pages.count - 6_000) }
        }
        #expect(pages.count == 6_000 && pages[0] == entry(next - 6_000) && pages[5_999] == entry(next - 1))
        // 80,000 events took 20 pages' worth; at most 3 hold the 6,000 kept, and 2 wait spare.
        #expect(allocator.blocks.load(ordering: .relaxed) <= 3 + FeedPages.sparePages)
    }
}

/// Counts the blocks handed out, from `calloc`.
private final class CountingAllocator: TableAllocator {
    let blocks = Atomic(0)
    func zeroedBlock(bytes: Int) -> any TableBlock {
        blocks.add(1, ordering: .relaxed)
        return HeapTableAllocator().zeroedBlock(bytes: bytes)
    }
    func preparesInBackground(bytes: Int) -> Bool { false }
}
