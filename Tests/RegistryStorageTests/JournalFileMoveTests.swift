import RegistryTestSupport
import Testing
@testable import RegistryStorage

@Suite struct JournalFileMoveTests {
    /// `count` entries of two segments each (two origins), 300 records per entry and origin.
    func entries(_ count: UInt64) -> [JournalEntry] {
        (0..<count).map { index in
            var own = LogSegment(origin: "node-a", epoch: 7)
            var peer = LogSegment(origin: "node-b", epoch: 3)
            for sequence in index * 300 + 1...index * 300 + 300 {
                own.append(sequence: sequence, hlc: sequence, payload: [UInt8(truncatingIfNeeded: sequence), 1, 2])
                peer.append(sequence: sequence, hlc: sequence, payload: [UInt8(truncatingIfNeeded: sequence), 3])
            }
            return JournalEntry(segments: [own, peer], clock: 10_000 + index)
        }
    }

    func records(_ log: OperationLog) throws -> [LogRecord] {
        var all = [LogRecord]()
        try log.forEach { all.append($0) }
        return all
    }

    /// Moving a file a segment at a time leaves the log as moving it at once does.
    @Test func movingInSmallTransactionsEqualsMovingAtOnce() throws {
        let file = entries(40)
        let whole = try TemporaryDirectory(), pieces = try TemporaryDirectory()
        defer {
            whole.remove()
            pieces.remove()
        }
        let atOnce = try OperationLog(directory: try DataDirectory(path: whole.path))
        var move = JournalFileMove(file)
        #expect(move.operations == 40 * 600)
        #expect(try move.moveNext(into: atOnce) == 40 * 600 && move.isFinished)

        let inPieces = try OperationLog(directory: try DataDirectory(path: pieces.path))
        var piecewise = JournalFileMove(file)
        var transactions = 0, moved = 0
        while !piecewise.isFinished {
            moved += try piecewise.moveNext(into: inPieces, segments: 1)
            try inPieces.checkpoint()
            transactions += 1
        }
        #expect(moved == 40 * 600)
        // Runs of 4,096 records of each origin: several segments, so several transactions.
        #expect(transactions > 4)
        #expect(try records(inPieces) == records(atOnce))
        #expect(inPieces.recordCount == atOnce.recordCount && inPieces.recordCount == 24_000)
        #expect(try inPieces.persistedClock() == 10_039)
    }

    /// A move cut short (here: a new process after two transactions) is made again from the
    /// file's start, and the log keeps each record once.
    @Test func aMoveCutShortIsMadeAgainWithoutDuplicates() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let file = entries(40)
        do {
            let log = try OperationLog(directory: try DataDirectory(path: temp.path))
            var move = JournalFileMove(file)
            try move.moveNext(into: log, segments: 1)
            try move.moveNext(into: log, segments: 1)
            #expect(!move.isFinished && log.recordCount > 0 && log.recordCount < 24_000)
        }
        let log = try OperationLog(directory: try DataDirectory(path: temp.path))
        var again = JournalFileMove(file)
        while !again.isFinished { try again.moveNext(into: log, segments: 3) }
        #expect(log.recordCount == 24_000)
        let all = try records(log)
        #expect(all.count == 24_000)
        #expect(Set(all.map { "\($0.origin)/\($0.sequence)" }).count == 24_000)
    }
}
