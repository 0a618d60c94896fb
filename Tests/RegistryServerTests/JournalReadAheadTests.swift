import NIOConcurrencyHelpers
import RegistryCore
import RegistryStorage
import RegistryWire
import Testing

@testable import RegistryServer

/// ``JournalReadAhead``: what the reading thread gives arrives on the caller's thread decoded, in
/// order, whole, across many batches; the first failure on either side is what the run throws.
@Suite struct JournalReadAheadTests {
    static let log = ReplayerTests.log

    /// `entries` journal entries of `perEntry` records each, of `operations` in turn.
    func entries(_ operations: [LoggedOperation], perEntry: Int) -> [JournalEntry] {
        stride(from: 0, to: operations.count, by: perEntry).map { start in
            var segment = LogSegment(origin: Self.log.origin.value, epoch: Self.log.epoch)
            for operation in operations[start..<min(start + perEntry, operations.count)] {
                segment.append(sequence: operation.sequence, hlc: operation.timestamp.rawValue, payload: OperationCodec.encode(operation.operation))
            }
            return JournalEntry(segments: [segment], clock: UInt64(start))
        }
    }

    @Test(arguments: [true, false]) func everyEntryArrivesDecodedAndInOrderAcrossManyBatches(readingAhead: Bool) throws {
        let operations = try StorageStartupTests().operations(count: 3 * JournalReadAhead.batchRecords + 17, seed: 4)
        let given = entries(operations, perEntry: 7)
        var arrived = [DecodedSegment.Record]()
        var clocks = [UInt64]()
        let finished = try JournalReadAhead.run(
            named: "test-read", skippingWhat: VersionVector(), readingAhead: readingAhead,
            reading: { (give) throws(StorageError) in
                for entry in given { try give(entry) }
                return given.count
            },
            applying: { entry in
                clocks.append(entry.clock)
                for segment in entry.segments { arrived += segment.records }
            })
        #expect(finished == given.count)
        #expect(clocks == given.map(\.clock))
        #expect(arrived.map(\.sequence) == operations.map(\.sequence))
        #expect(arrived.map(\.hlc) == operations.map(\.timestamp.rawValue))
        #expect(arrived.map(\.operation) == operations.map(\.operation))
    }

    @Test func whatIsHeldAlreadyIsCountedButNotDecoded() throws {
        let operations = try StorageStartupTests().operations(count: 40, seed: 5)
        var held = VersionVector()
        held.recordAll(through: 20, in: Self.log)
        var segments = [DecodedSegment]()
        try JournalReadAhead.run(
            named: "test-read", skippingWhat: held,
            reading: { [given = entries(operations, perEntry: 10)] (give) throws(StorageError) in
                for entry in given { try give(entry) }
            },
            applying: { entry in segments += entry.segments })
        #expect(segments.map(\.count) == [10, 10, 10, 10])
        #expect(segments.map(\.records.count) == [0, 0, 10, 10])
    }

    @Test func theFirstFailureOfTheApplyingSideIsThrownAfterTheReaderIsDone() throws {
        let operations = try StorageStartupTests().operations(count: 2 * JournalReadAhead.batchRecords, seed: 6)
        let given = entries(operations, perEntry: 50)
        let read = NIOLockedValueBox(0)
        var applied = 0
        #expect {
            try JournalReadAhead.run(
                named: "test-read", skippingWhat: VersionVector(),
                reading: { (give) throws(StorageError) in
                    for entry in given {
                        try give(entry)
                        read.withLockedValue { $0 += 1 }
                    }
                },
                applying: { (_) throws(StorageError) in
                    applied += 1
                    if applied >= 3 { throw .corrupt("applying entry \(applied) failed") }
                })
        } throws: { error in
            "\(error)".contains("applying entry 3 failed")
        }
        #expect(applied == 3)
        #expect(read.withLockedValue { $0 } == given.count)
    }

    @Test(arguments: [true, false]) func aReadingFailureIsThrownAfterWhatWasReadBeforeItIsApplied(readingAhead: Bool) throws {
        let operations = try StorageStartupTests().operations(count: 30, seed: 7)
        let given = entries(operations, perEntry: 10)
        var applied = 0
        #expect {
            try JournalReadAhead.run(
                named: "test-read", skippingWhat: VersionVector(), readingAhead: readingAhead,
                reading: { (give) throws(StorageError) in
                    for entry in given { try give(entry) }
                    throw .corrupt("file 3 is damaged")
                },
                applying: { _ in applied += 1 })
        } throws: { error in
            "\(error)".contains("file 3 is damaged")
        }
        #expect(applied == given.count)
    }
}
