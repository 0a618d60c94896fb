import RegistryCore
import RegistryTestSupport
import Testing
@testable import RegistryStorage

/// `JournalEntryWriter` encodes records in place; the oracle is `LogSegment`'s own record
/// encoding (`append(sequence:hlc:payload:)`, which does not go through the writer), read back
/// through `JournalEntry.read`.
@Suite struct JournalEntryWriterTests {
    /// Random segments: up to 4 runs of 0...40 records of 0...300 payload bytes each.
    func randomSegments(_ random: inout SplitMix64) -> [LogSegment] {
        (0..<Int.random(in: 0...4, using: &random)).map { run in
            var segment = LogSegment(origin: "node-\(run % 3)", epoch: UInt64(run + 1))
            var sequence = UInt64.random(in: 1...1_000, using: &random)
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                let payload = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                segment.append(sequence: sequence, hlc: UInt64.random(in: 0...UInt64.max, using: &random), payload: payload)
                sequence += UInt64.random(in: 1...3, using: &random)
            }
            return segment
        }
    }

    /// Writes `segments` a record at a time through the writer, after `prefix` bytes already in
    /// the buffer.
    func writtenInPlace(_ segments: [LogSegment], clock: UInt64, file: UInt64, prefix: [UInt8])
        throws -> (bytes: [UInt8], spans: [JournalEntryWriter.Span])
    {
        var writer = JournalEntryWriter(appendingTo: prefix, clock: clock)
        for segment in segments {
            writer.startSegment(origin: segment.origin, epoch: segment.epoch)
            try segment.forEachRecord { sequence, hlc, payload in
                writer.appendRecord(sequence: sequence, hlc: hlc) { $0.append(contentsOf: payload) }
            }
        }
        return writer.finish(file: file)
    }

    @Test func recordsWrittenInPlaceReadBackAsTheSegmentsThatHoldThem() throws {
        var random = SplitMix64(seed: 42)
        for _ in 0..<200 {
            let segments = randomSegments(&random)
            let clock = UInt64.random(in: 0...UInt64.max, using: &random)
            let file = UInt64.random(in: 1...99, using: &random)
            let prefix = (0..<Int.random(in: 0...3, using: &random)).map { _ in UInt8(0xAB) }
            let (bytes, spans) = try writtenInPlace(segments, clock: clock, file: file, prefix: prefix)
            #expect(Array(bytes.prefix(prefix.count)) == prefix, "what the buffer held stays")
            let read = try bytes.withUnsafeBytes { try JournalEntry.read($0, at: prefix.count, file: file) }
            guard case .entry(let entry, let next) = read else {
                Issue.record("read \(read)")
                return
            }
            #expect(entry == JournalEntry(segments: segments, clock: clock))
            #expect(next == bytes.count)
            #expect(spans.map(\.origin) == segments.map(\.origin) && spans.map(\.epoch) == segments.map(\.epoch))
            #expect(spans.map(\.count) == segments.map(\.count))
            #expect(spans.map(\.firstSequence) == segments.map(\.firstSequence))
            #expect(spans.map(\.lastSequence) == segments.map(\.lastSequence))
            #expect(spans.map { Array(bytes[$0.records]) } == segments.map(\.bytes), "each span locates its segment's records")
        }
    }

    /// The journal's in-place append makes durable what it wrote, and the index learns each
    /// segment's range from the writer.
    /// The journal reuses one buffer for every commit: finishing an entry must hand back the
    /// storage it was written into, not a copy.
    @Test func finishingHandsBackTheBufferWithoutACopy() throws {
        var writer = JournalEntryWriter(appendingTo: [], clock: 7)
        writer.startSegment(origin: "node-a", epoch: 1)
        var storage: UInt = 0
        writer.appendRecord(sequence: 1, hlc: 2) { bytes in
            bytes.append(contentsOf: [1, 2, 3])
            storage = bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        }
        let (bytes, spans) = writer.finish(file: 1)
        #expect(bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == storage)
        #expect(spans.count == 1 && spans[0].count == 1)
    }

    @Test func theJournalAppendsEntriesWrittenInPlace() throws {
        let fs = SimulatedFileSystem()
        let index = JournalIndex()
        var random = SplitMix64(seed: 7)
        let written = (1...5).map { JournalEntry(segments: randomSegments(&random), clock: $0) }
        do {
            let journal = try CommitJournal(fs: fs, directory: "/data", number: 1, index: index)
            for entry in written {
                try journal.append(clock: entry.clock) { writer in
                    for segment in entry.segments {
                        writer.startSegment(origin: segment.origin, epoch: segment.epoch)
                        try? segment.forEachRecord { sequence, hlc, payload in
                            writer.appendRecord(sequence: sequence, hlc: hlc) { $0.append(contentsOf: payload) }
                        }
                    }
                }
                // What peer links are handed: the records just written, as the journal holds them.
                #expect(journal.lastEntrySegmentCount == entry.segments.count)
                for (index, segment) in entry.segments.enumerated() {
                    #expect(journal.lastEntryRecords(ofSegment: index) == (try segment.records()))
                }
            }
        }
        var recovered = [JournalEntry]()
        _ = try CommitJournal.recover(in: "/data", on: fs) { (_, entry) throws(StorageError) in recovered.append(entry) }
        #expect(recovered == written)
        var expected = [LogID: ClosedRange<UInt64>]()
        for segment in written.flatMap(\.segments) where segment.count > 0 {
            expected[segment.log] = (expected[segment.log]?.lowerBound ?? segment.firstSequence)...segment.lastSequence
        }
        #expect(index.files.first?.ranges == expected)
    }
}
