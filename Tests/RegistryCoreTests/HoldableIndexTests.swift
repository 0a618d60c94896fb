import RegistryTestSupport
import Synchronization
import Testing
@testable import RegistryCore

/// A flag a test raises to end a hold, as a forked snapshot's child does.
private final class ReleaseFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    func raise() { raised.store(true, ordering: .relaxed) }
    var isRaised: Bool { raised.load(ordering: .relaxed) }
}

@Suite("Holdable index")
struct HoldableIndexTests {
    /// Random sets, holds and releases against a Dictionary: every answer, the count and a full
    /// enumeration agree at every stage (holding, moving back, the held index's own growth), and
    /// while a hold lasts the main index gets no key it did not have.
    @Test(.offThePool, arguments: [1 as UInt64, 2, 3])
    func agreesWithADictionaryThroughHoldsAndReleases(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: random.next()))
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        var flag: ReleaseFlag?
        var mainKeysAtHold = 0
        var (holds, stepsHolding, stepsMovingBack, holdsWhileMovingBack) = (0, 0, 0, 0)
        for step in 0..<30_000 {
            if flag == nil, random.next() % 2_000 == 0 {
                if index.holdsEntries { holdsWhileMovingBack += 1 }
                let started = ReleaseFlag()
                index.hold(until: { started.isRaised })
                flag = started
                mainKeysAtHold = index.main.count
                holds += 1
            } else if let holding = flag, random.next() % 1_500 == 0 {
                holding.raise()
                flag = nil
            }
            if step % 7_919 == 7_918 {
                // The rare bulk removal: a hold goes on; otherwise held entries move back first.
                let wasHolding = index.isHolding
                let removed = index.removeAll { _, value in value % 5 == 0 }
                for (key, _) in removed { reference[key] = nil }
                #expect(removed.allSatisfy { $0.1 % 5 == 0 })
                #expect(wasHolding ? index.isHolding : !index.holdsEntries)
                mainKeysAtHold = index.main.count
            }
            let key = nextKey(&random, &keys, oldOneIn: 4)
            #expect(index.set(key, UInt32(step)) == reference.updateValue(UInt32(step), forKey: key))
            #expect(index.count == reference.count)
            if index.isHolding {
                stepsHolding += 1
                #expect(index.main.count == mainKeysAtHold, "a hold let a new key into the main index")
            } else if index.holdsEntries {
                stepsMovingBack += 1
            }
            for _ in 0..<3 {
                let probe = keys[Int(random.next() % UInt64(keys.count))]
                #expect(index.value(for: probe) == reference[probe])
            }
            #expect(index.value(for: UUID128(high: random.next(), low: 0)) == nil)
            if step % 211 == 0 || (index.holdsEntries && step % 53 == 0) {
                var seen = [UUID128: UInt32]()
                index.forEach { key, value in
                    #expect(seen.updateValue(value, forKey: key) == nil, "a key enumerated twice")
                }
                let same = seen == reference
                #expect(same, "the enumeration differs from the reference at step \(step)")
            }
        }
        #expect(holds >= 5 && stepsHolding > 2_000 && stepsMovingBack > 1_000, "the phases were not all seen")
        #expect(holdsWhileMovingBack >= 1, "no hold began while held entries were moving back")
    }

    /// A hold puts every new key aside and sets a key the main index has in place; once released,
    /// each insert moves one held entry back, so the held index empties gradually and then goes.
    @Test func heldEntriesMoveBackGraduallyAfterTheRelease() {
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: 11))
        for number in 0..<10_000 { index.set(UUID128(high: 1, low: UInt64(number)), UInt32(number)) }
        let flag = ReleaseFlag()
        index.hold(until: { flag.isRaised })
        for number in 0..<5_000 { index.set(UUID128(high: 2, low: UInt64(number)), UInt32(number)) }
        #expect(index.set(UUID128(high: 1, low: 7), 70) == 7)
        #expect(index.main.count == 10_000)
        #expect(index.main.value(for: UUID128(high: 1, low: 7)) == 70)
        #expect(index.main.value(for: UUID128(high: 2, low: 0)) == nil)
        #expect(index.count == 15_000)

        flag.raise()
        for number in 0..<2_500 { index.set(UUID128(high: 3, low: UInt64(number)), UInt32(number)) }
        #expect(index.holdsEntries, "half the held entries moved back at once")
        #expect(!index.isHolding)
        #expect(index.main.count > 12_500 && index.main.count <= 15_000)
        #expect(index.count == 17_500)
        for number in 2_500..<12_000 { index.set(UUID128(high: 3, low: UInt64(number)), UInt32(number)) }
        #expect(!index.holdsEntries)
        #expect(index.main.count == 27_000)
        for number in 0..<5_000 { #expect(index.main.value(for: UUID128(high: 2, low: UInt64(number))) == UInt32(number)) }
    }

    /// `forEach` walks in the order of the forked child's drain (a snapshot lists the claims so,
    /// whichever walk wrote it): held entries, then the main index's old table's unmoved entries
    /// while it grows, then its current table. Both see every entry once.
    @Test func forEachWalksInTheDrainsOrderWhileHoldingAndGrowing() {
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: 11))
        var number: UInt64 = 0
        while !(number > 1_000 && index.main.isMovingEntries) {
            index.set(UUID128(high: 1, low: number), UInt32(number))
            number += 1
        }
        index.hold(until: { false })
        for held in 0..<500 as Range<UInt64> { index.set(UUID128(high: 2, low: held), UInt32(held)) }
        #expect(index.main.isMovingEntries && index.holdsEntries)
        var walked = [UUID128]()
        index.forEach { key, _ in walked.append(key) }
        var drained = [UUID128]()
        index.drainInForkedChild { key, _ in drained.append(key) }  // the index is not used after
        #expect(walked == drained)
        #expect(walked.count == Int(number) + 500 && Set(walked).count == walked.count)
    }

    /// Released while the held index is still growing into a bigger table, with held keys set
    /// again while they move back: every answer, the count and the enumeration stay right.
    @Test func aReleaseWhileTheHeldIndexGrowsAndHeldKeysSetAgain() {
        var random = SplitMix64(seed: 21)
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: 12))
        var reference = [UUID128: UInt32]()
        var keys = [UUID128]()
        for step in 0..<500 {
            let key = nextKey(&random, &keys, oldOneIn: 1_000)
            index.set(key, UInt32(step))
            reference[key] = UInt32(step)
        }
        index.hold(until: { false })
        var held = [UUID128]()
        for step in 0..<800 {
            let key = UUID128(high: 7, low: UInt64(step))
            index.set(key, UInt32(step))
            reference[key] = UInt32(step)
            held.append(key)
        }
        #expect(index.heldIndexIsGrowing, "the held index was not growing at the release")
        index.release()
        var setAgain = 0
        for step in 0..<3_000 where index.holdsEntries || step < 10 {
            let key = step % 2 == 0 ? held[Int(random.next() % UInt64(held.count))] : nextKey(&random, &keys, oldOneIn: 1_000)
            #expect(index.set(key, UInt32(10_000 + step)) == reference.updateValue(UInt32(10_000 + step), forKey: key))
            if step % 2 == 0 { setAgain += 1 }
            #expect(index.count == reference.count)
            for probe in held.prefix(50) { #expect(index.value(for: probe) == reference[probe]) }
            var seen = [UUID128: UInt32]()
            index.forEach { key, value in #expect(seen.updateValue(value, forKey: key) == nil, "a key enumerated twice") }
            let same = seen == reference
            #expect(same, "the enumeration differs from the reference at step \(step)")
        }
        #expect(!index.holdsEntries && setAgain > 100)
    }

    /// A removal during a hold leaves the hold on and writes nothing into the main table's old pages.
    @Test func aRemovalDuringAHoldKeepsTheHold() {
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: 5))
        for number in 0..<1_000 { index.set(UUID128(high: 1, low: UInt64(number)), UInt32(number)) }
        index.hold(until: { false })
        for number in 0..<1_000 { index.set(UUID128(high: 2, low: UInt64(number)), UInt32(number)) }
        let removed = index.removeAll { _, value in value % 2 == 0 }
        #expect(removed.count == 1_000)
        #expect(index.isHolding && index.main.count == 500 && index.count == 1_000)
        index.set(UUID128(high: 3, low: 0), 1)
        #expect(index.main.count == 500)
        #expect(index.value(for: UUID128(high: 2, low: 1)) == 1 && index.value(for: UUID128(high: 2, low: 2)) == nil)
    }

    /// A hold that takes no key ends with nothing to move; a second hold first moves back what
    /// the first still had aside.
    @Test func aNewHoldMovesTheLastOneBackFirst() {
        var index = HoldableIndex(HashIndex<UUID128>(capacity: 16, seed: 3))
        index.hold(until: { false })
        index.release()
        #expect(!index.holdsEntries)
        index.hold(until: { false })
        for number in 0..<300 { index.set(UUID128(high: 4, low: UInt64(number)), 1) }
        index.release()
        index.hold(until: { false })
        #expect(index.main.count == 300)
        #expect(index.isHolding)
        index.set(UUID128(high: 5, low: 0), 2)
        #expect(index.main.count == 300 && index.count == 301)
    }
}

@Suite("Claims held aside")
struct HeldClaimsTests {
    /// The same registrations (sibling apps, reinstalls and merges from a small pool of
    /// identifiers) applied to a state that holds its new claims aside now and then, and to one
    /// that never does, give the same answers, operations, digest and state.
    @Test(arguments: [4 as UInt64, 5])
    func holdingChangesNoAnswer(seed: UInt64) throws {
        var registrations = try SampleRegistrations(seed: seed, poolSize: 3_000)
        var plain = RegistryState()
        var holding = RegistryState()
        var clock = HybridLogicalClock()
        var flag: ReleaseFlag?
        var heldSteps = 0
        for step in 0..<6_000 {
            if flag == nil, registrations.draw() % 500 == 0 {
                let started = ReleaseFlag()
                holding.holdNewClaims(until: { started.isRaised })
                flag = started
            } else if let started = flag, registrations.draw() % 400 == 0 {
                started.raise()
                flag = nil
            }
            if holding.holdsClaimsAside { heldSteps += 1 }
            let registration = try registrations.next()
            let now = clock.tick(wallMillis: UInt64(1_000 + step))
            let minted = registrations.mint(at: now)
            let expected = plain.register(registration, at: now, origin: NodeID(trusted: "node-a")) { _ in minted }
            let got = holding.register(registration, at: now, origin: NodeID(trusted: "node-a")) { _ in minted }
            #expect(got.operation == expected.operation)
            #expect(got.outcome == expected.outcome)
        }
        #expect(heldSteps > 1_000, "claims were not held long enough to tell")
        #expect(holding.digest == plain.digest)
        #expect(holding.claimCount == plain.claimCount)
        #expect(holding.snapshot() == plain.snapshot())
    }
}
