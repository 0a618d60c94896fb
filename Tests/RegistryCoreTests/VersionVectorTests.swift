import Testing
@testable import RegistryCore

/// The version vector against a model written here: a set of the sequences held per log.
@Suite struct VersionVectorTests {
    let a1 = LogID(origin: NodeID(trusted: "node-a"), epoch: 1)
    let a2 = LogID(origin: NodeID(trusted: "node-a"), epoch: 2)
    let b1 = LogID(origin: NodeID(trusted: "node-b"), epoch: 1)

    @Test func admissionSaysNextDuplicateOrGap() {
        var vector = VersionVector()
        #expect(vector[a1] == 0)
        #expect(vector.admission(of: 1, in: a1) == .next)
        #expect(vector.admission(of: 3, in: a1) == .gap(missing: 1...2))
        vector.record(1, in: a1)
        vector.record(2, in: a1)
        #expect(vector.admission(of: 2, in: a1) == .duplicate && vector.admission(of: 1, in: a1) == .duplicate)
        #expect(vector.admission(of: 3, in: a1) == .next)
        #expect(vector.admission(of: 1, in: a2) == .next, "each epoch is a log of its own")
        vector.recordAll(through: 9, in: b1)
        #expect(vector[b1] == 9 && vector.admission(of: 10, in: b1) == .next)
        #expect(vector.logs.map { "\($0.log)=\($0.sequence)" } == ["node-a/1=2", "node-b/1=9"])
        #expect(vector.description == "node-a/1: 2, node-b/1: 9")
    }

    /// How far one vector is ahead of another: summed over the logs where it is ahead, none
    /// counted where it is behind, and saturating rather than wrapping.
    @Test func operationsAheadCountsOnlyWhatTheOtherLacks() {
        var peer = VersionVector()
        peer.recordAll(through: 10, in: a1)
        peer.recordAll(through: 3, in: b1)
        var own = VersionVector()
        own.recordAll(through: 4, in: a1)
        own.recordAll(through: 7, in: b1)
        own.recordAll(through: 5, in: a2)
        #expect(peer.operationsAhead(of: own) == 6)
        #expect(own.operationsAhead(of: peer) == 4 + 5)
        #expect(peer.operationsAhead(of: peer) == 0 && VersionVector().operationsAhead(of: own) == 0)
        #expect(peer.operationsAhead(of: VersionVector()) == 13)
        var huge = VersionVector()
        huge.recordAll(through: .max, in: a1)
        huge.recordAll(through: .max, in: b1)
        #expect(huge.operationsAhead(of: VersionVector()) == .max)
    }

    /// Random deliveries (repeats, reorderings, gaps) to a node that applies only what the
    /// vector admits as next and retries what it held back: the vector always equals the
    /// longest run 1...n the model holds, and nothing is applied twice or out of order.
    @Test(arguments: Array(1...100) as [UInt64])
    func randomDeliveriesKeepTheVectorAtTheLongestHeldRun(seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        let logs = [a1, a2, b1]
        var vector = VersionVector()
        var applied = [LogID: [UInt64]]()
        var waiting = [(LogID, UInt64)]()
        func deliver(_ log: LogID, _ sequence: UInt64) -> Bool {
            switch vector.admission(of: sequence, in: log) {
            case .next:
                vector.record(sequence, in: log)
                applied[log, default: []].append(sequence)
                return true
            case .duplicate:
                #expect(applied[log, default: []].contains(sequence), "a duplicate must have been applied")
                return true
            case .gap(let missing):
                #expect(!missing.isEmpty && missing.upperBound == sequence - 1 && !applied[log, default: []].contains(missing.lowerBound))
                return false
            }
        }
        for _ in 0..<300 {
            let log = logs[Int(generator.next() % 3)]
            let sequence = 1 + generator.next() % 20
            if !deliver(log, sequence) { waiting.append((log, sequence)) }
            // Retry what waits, as a node would once the missing operations arrive.
            waiting = waiting.filter { !deliver($0.0, $0.1) }
        }
        for log in logs {
            let held = applied[log, default: []]
            #expect(held == (0..<held.count).map { UInt64($0) + 1 }, "applied in order, once each")
            var run: UInt64 = 0
            while held.contains(run + 1) { run += 1 }
            #expect(vector[log] == run)
        }
    }
}
