import RegistryCore
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing

@testable import RegistryServer

/// ``Replayer`` on single segments of every shape: continuing the log, overlapping what is held,
/// crossing the limit, with a gap inside, and one whose record does not decode. The oracle applies
/// the operations one by one by the version-vector rule, written here apart from the replayer.
@Suite struct ReplayerTests {
    static let log = LogID(origin: StorageStartupTests.node, epoch: StorageStartupTests.epoch)

    /// A segment of `operations` (sequences as given, increasing).
    func segment(_ operations: [LoggedOperation]) -> LogSegment {
        var segment = LogSegment(origin: Self.log.origin.value, epoch: Self.log.epoch)
        for operation in operations {
            segment.append(sequence: operation.sequence, hlc: operation.timestamp.rawValue, payload: OperationCodec.encode(operation.operation))
        }
        return segment
    }

    @Test(arguments: [1, 2, 3] as [UInt64]) func everyShapeOfSegmentAppliesWhatTheRuleSays(seed: UInt64) throws {
        let operations = try StorageStartupTests().operations(count: 60, seed: seed)
        var random = SplitMix64(seed: seed)
        for trial in 0..<200 {
            // What is held already, and the segment: a run after some point, maybe missing one.
            let held = Int(random.next() % 30)
            // Mostly near what is held: the segment continues it (a seventh of the time), overlaps it or leaves a gap.
            let start = max(0, held - 3 + Int(random.next() % 7))
            let end = min(operations.count, start + 1 + Int(random.next() % 20))
            var records = Array(operations[start..<end])
            if records.count > 2, random.next() % 4 == 0 { records.remove(at: 1 + Int(random.next() % UInt64(records.count - 2))) }
            let limit: UInt64? = random.next() % 3 == 0 ? UInt64(random.next() % 60) : nil

            var base = RegistryState()
            for operation in operations[..<held] { base.apply(operation.operation) }
            var vector = VersionVector()
            vector.recordAll(through: UInt64(held), in: Self.log)

            // The oracle.
            var expected = base
            var expectedThrough = UInt64(held)
            var expectedGap: ClosedRange<UInt64>?
            var expectedApplied = 0
            for record in records where record.sequence > expectedThrough && record.sequence <= (limit ?? .max) {
                if record.sequence != expectedThrough + 1 {
                    expectedGap = (expectedThrough + 1)...(record.sequence - 1)
                    break
                }
                expected.apply(record.operation)
                expectedThrough = record.sequence
                expectedApplied += 1
            }

            var replayer = Replayer(registry: base, vector: vector, limits: limit.map { [Self.log: $0] })
            var decoder = OperationDecoder()
            let outcome = try replayer.apply(DecodedSegment(segment(records), decoder: &decoder))
            let context = "trial \(trial): held \(held), records \(records.map(\.sequence)), limit \(String(describing: limit))"
            if let expectedGap {
                guard case .gap(let log, let missing) = outcome else {
                    Issue.record("\(context): no gap reported")
                    continue
                }
                #expect(log == Self.log && missing == expectedGap, "\(context)")
            } else {
                #expect(outcome == nil, "\(context)")
            }
            #expect(replayer.registry.snapshot() == expected.snapshot(), "\(context)")
            #expect(replayer.vector[Self.log] == expectedThrough, "\(context)")
            #expect(replayer.applied == expectedApplied, "\(context)")
        }
    }

    @Test func aRecordThatDoesNotDecodeStopsTheReplayWithWhatCameBeforeItHeld() throws {
        let operations = try StorageStartupTests().operations(count: 5, seed: 9)
        var segment = LogSegment(origin: Self.log.origin.value, epoch: Self.log.epoch)
        for operation in operations[..<3] {
            segment.append(sequence: operation.sequence, hlc: operation.timestamp.rawValue, payload: OperationCodec.encode(operation.operation))
        }
        // Field 1 (a registration) whose length runs past the end.
        segment.append(sequence: 4, hlc: 1, payload: [0x0A, 0x7F])
        var replayer = Replayer(registry: RegistryState(), vector: VersionVector())
        #expect {
            var decoder = OperationDecoder()
            _ = try replayer.apply(DecodedSegment(segment, decoder: &decoder))
        } throws: { error in
            "\(error)".contains("\(Self.log)/4 does not decode")
        }
        var expected = RegistryState()
        for operation in operations[..<3] { expected.apply(operation.operation) }
        #expect(replayer.vector[Self.log] == 3)
        #expect(replayer.registry.snapshot() == expected.snapshot())
    }
}
