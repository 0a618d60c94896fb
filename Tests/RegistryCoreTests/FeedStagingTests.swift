import RegistryTestSupport
import Testing
@testable import RegistryCore

/// `RegistryState.moveEvents(to:log:sequence:time:)` and `FeedStaging.take(heldBy:)` against an
/// oracle written apart: a twin state whose events are taken with `takeEvents()` and stamped here,
/// and commits that take the entries of the operations applied up to a random earlier point.
/// The operations are a `FeedWorkload`'s: registrations, merges, binds, unbinds and forgets of
/// three nodes, so that one operation often gives several events.
@Suite struct FeedStagingTests {
    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func stagedEventsAreTakenInApplyOrderAPrefixAtATime(seed: UInt64) {
        let operations = FeedWorkload(seed: seed).operations
        var moving = RegistryState()
        moving.recordEvents(configuredRules: [])
        var taking = RegistryState()
        taking.recordEvents(configuredRules: [])
        var staging = FeedStaging()
        var random = SplitMix64(seed: seed)
        // The oracle: every event stamped with the index of its operation, and the vector after
        // each operation.
        var expected: [(applied: Int, entry: FeedEntry)] = []
        var vectors: [VersionVector] = []
        var vector = VersionVector()
        var committed = -1
        var published: [FeedEntry] = []
        var severalEvents = 0
        for (index, operation) in operations.enumerated() {
            moving.apply(operation.operation)
            moving.moveEvents(to: &staging, log: operation.log, sequence: operation.sequence, time: operation.timestamp)
            taking.apply(operation.operation)
            let events = taking.takeEvents()
            if events.count > 1 { severalEvents += 1 }
            for event in events {
                expected.append((index, FeedEntry(log: operation.log, sequence: operation.sequence, time: operation.timestamp, event: event)))
            }
            vector.raise(to: operation.sequence, in: operation.log)
            vectors.append(vector)
            // Now and then a commit of the operations up to a random point not yet committed.
            if random.next() % 3 == 0 {
                let through = Int.random(in: committed...index, using: &random)
                let taken = through < 0 ? staging.take(heldBy: VersionVector()) : staging.take(heldBy: vectors[through])
                #expect(taken == expected.filter { $0.applied > committed && $0.applied <= through }.map(\.entry), "seed \(seed), operation \(index)")
                published += taken
                committed = max(committed, through)
            }
        }
        published += staging.take(heldBy: vector)
        #expect(published == expected.map(\.entry), "seed \(seed)")
        #expect(staging.entries.isEmpty)
        #expect(severalEvents > 0, "seed \(seed): no operation gave several events, so their order went untested")
    }
}
