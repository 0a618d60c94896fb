import RegistryCore
import Testing
@testable import RegistryServer

/// ``CommitQueue``: what a commit pass may take, and when an answer may leave.
@Suite struct CommitQueueTests {
    typealias Queue = CommitQueue<String, String>

    @Test func aPassTakesFilledTicketsInOrderUpToTheFirstGap() {
        var queue = Queue()
        let first = queue.reserve(records: 2)
        let second = queue.reserve(records: 3)
        let third = queue.reserve(records: 1)
        #expect([first, second, third] == [1, 2, 3] && queue.pendingRecords == 6)
        queue.fill(third, with: "c")
        queue.fill(first, with: "a")
        #expect(queue.canTake)
        // The second is still being encoded: the third, though filled, must wait for it.
        let pass = queue.take()
        #expect(pass?.contents == ["a"] && pass?.through == 1)
        #expect(!queue.canTake && queue.take() == nil && queue.pendingRecords == 4)
        queue.fill(second, with: "b")
        let next = queue.take()
        #expect(next?.contents == ["b", "c"] && next?.through == 3 && queue.pendingRecords == 0)
        #expect(queue.take() == nil)
    }

    @Test func anAnswerLeavesOnceEveryTicketItMayHaveSeenIsDurable() {
        var queue = Queue()
        let first = queue.reserve(records: 1)
        let second = queue.reserve(records: 1)
        #expect(!queue.allDurable)
        #expect(queue.wait("saw both", through: second) == nil)
        #expect(queue.wait("saw the first", through: first) == nil)
        queue.fill(first, with: "a")
        queue.fill(second, with: "b")
        _ = queue.take()
        #expect(queue.markDurable(through: first) == ["saw the first"])
        #expect(queue.markDurable(through: second) == ["saw both"])
        #expect(queue.allDurable)
        // Nothing undurable left: an answer that saw ticket 2 need not wait at all.
        #expect(queue.wait("late", through: second) == "late")
    }

    @Test func waitersLeaveInTheOrderTheyWereQueued() {
        var queue = Queue()
        let ticket = queue.reserve(records: 1)
        for name in ["x", "y", "z"] { #expect(queue.wait(name, through: ticket) == nil) }
        queue.fill(ticket, with: "a")
        _ = queue.take()
        #expect(queue.markDurable(through: ticket) == ["x", "y", "z"])
    }

    @Test func aFailedNodeHandsBackEveryWaiter() {
        var queue = Queue()
        let ticket = queue.reserve(records: 1)
        #expect(queue.wait("x", through: ticket) == nil)
        #expect(queue.wait("y", through: ticket) == nil)
        #expect(queue.removeAllWaiters() == ["x", "y"])
        #expect(queue.removeAllWaiters().isEmpty)
    }

    /// Two event loops and a writer interleaved at random, many times: whatever the order of
    /// reserving, filling, taking and syncing, the journal receives every ticket exactly once
    /// and in order, no answer leaves before everything it may have seen is durable, and every
    /// answer leaves in the end.
    @Test(arguments: [1, 2, 3, 4, 5]) func randomInterleavingsKeepTheJournalInOrderAndLoseNoAnswer(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var queue = CommitQueue<UInt64, UInt64>()
        var unfilled = [UInt64]()
        var journal = [UInt64]()
        var inFlight: (through: UInt64, count: Int)?
        var waiting = [UInt64: UInt64]()  // waiter -> the ticket it saw
        var released = 0
        var nextWaiter: UInt64 = 0
        for _ in 0..<20_000 {
            switch random.next() % 5 {
            case 0:
                unfilled.append(queue.reserve(records: Int(random.next() % 100) + 1))
            case 1 where !unfilled.isEmpty:
                let index = Int(random.next() % UInt64(unfilled.count))
                queue.fill(unfilled[index], with: unfilled[index])
                unfilled.remove(at: index)
            case 2 where queue.reserved > 0:
                nextWaiter += 1
                let through = queue.reserved - random.next() % min(queue.reserved, 3)
                if queue.wait(nextWaiter, through: through) != nil {
                    #expect(through <= queue.durable)
                    released += 1
                } else {
                    waiting[nextWaiter] = through
                }
            case 3 where inFlight == nil:
                if let pass = queue.take() {
                    journal += pass.contents
                    inFlight = (pass.through, pass.contents.count)
                }
            case 4:
                if let pass = inFlight {
                    for waiter in queue.markDurable(through: pass.through) {
                        #expect(waiting[waiter].map { $0 <= pass.through } == true)
                        waiting[waiter] = nil
                        released += 1
                    }
                    inFlight = nil
                }
            default:
                break
            }
        }
        // Drain: fill what is left, then take and sync until nothing remains.
        for ticket in unfilled { queue.fill(ticket, with: ticket) }
        if let pass = inFlight {
            for waiter in queue.markDurable(through: pass.through) { waiting[waiter] = nil; released += 1 }
        }
        while let pass = queue.take() {
            journal += pass.contents
            for waiter in queue.markDurable(through: pass.through) { waiting[waiter] = nil; released += 1 }
        }
        #expect(journal == Array(1...queue.reserved))
        #expect(waiting.isEmpty && released == Int(nextWaiter))
        #expect(queue.allDurable && queue.pendingRecords == 0)
    }
}
