import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// Every transition of the group-commit bookkeeping, without a disk.
@Suite struct CommitStateMachineTests {
    typealias Machine = CommitStateMachine<String>

    func operation(_ sequence: UInt64) -> LoggedOperation {
        let vendor = Vendor(trusted: "com.v")
        let device = DeviceRef(
            id: DeviceID(UUID128(high: 1, low: sequence)), created: HLCTimestamp(millis: 1, counter: 0),
            origin: NodeID(trusted: "n"), vendor: vendor)
        let op = RegistrationOp(
            device: device, bundle: try! BundleID(parsing: "com.v.a"),
            claims: [Identifier(kind: .idfv, value: UUID128(high: 2, low: sequence))], merged: [], seen: device.created)
        return LoggedOperation(origin: NodeID(trusted: "n"), epoch: 1, sequence: sequence, timestamp: device.created, operation: .registration(op))
    }

    @Test func answersThatSawOnlyDurableStateGoAtOnce() {
        var machine = Machine()
        #expect(!machine.holdsUndurable)
        #expect(machine.answered("read", waits: false) == .deliver)
        #expect(machine.pendingWaiters.isEmpty && !machine.isRunning)
    }

    @Test func theFirstWaitingAnswerStartsAPassAndLaterOnesJoinIt() {
        var machine = Machine()
        machine.recordOperations { $0.append(operation(1)) }
        #expect(machine.holdsUndurable)
        #expect(machine.answered("a", waits: true) == .waitAndStartPass)
        #expect(machine.isRunning)
        #expect(machine.answered("b", waits: true) == .wait)
        guard case .write(let operations, let waiters) = machine.nextPass() else {
            Issue.record("expected a write")
            return
        }
        #expect(operations.map(\.sequence) == [1] && waiters == ["a", "b"])
        #expect(machine.pendingOperations.isEmpty && machine.pendingWaiters.isEmpty)
        // While the pass writes, the operations it took are not durable yet: observers wait.
        #expect(machine.holdsUndurable)
        #expect(machine.answered("c", waits: true) == .wait)
        // The next pass has only c, which observed the write: it goes once that write is done.
        guard case .deliver(let ready) = machine.nextPass() else {
            Issue.record("expected a delivery")
            return
        }
        #expect(ready == ["c"])
        guard case .finish = machine.nextPass() else {
            Issue.record("expected the end")
            return
        }
        #expect(!machine.isRunning && !machine.holdsUndurable)
        // A later answer starts a new pass.
        machine.recordOperations { $0.append(operation(2)) }
        #expect(machine.answered("d", waits: true) == .waitAndStartPass)
    }

    @Test func operationsArrivingDuringAPassGoInTheNextOne() {
        var machine = Machine()
        machine.recordOperations { $0.append(operation(1)) }
        _ = machine.answered("a", waits: true)
        guard case .write(let first, _) = machine.nextPass() else {
            Issue.record("expected a write")
            return
        }
        machine.recordOperations { $0 += [operation(2), operation(3)] }
        #expect(machine.answered("b", waits: true) == .wait)
        guard case .write(let second, let waiters) = machine.nextPass() else {
            Issue.record("expected a write")
            return
        }
        #expect(first.map(\.sequence) == [1] && second.map(\.sequence) == [2, 3] && waiters == ["b"])
    }

    /// A snapshot installed while operations wait holds some of them: those are not written
    /// again, and their answers go with the next pass all the same.
    /// A written pass's array, emptied and handed back, is what the pass after next fills: the
    /// one between fills the array that was spare, so the two take turns.
    @Test func aWrittenArrayHandedBackIsFilledAgain() {
        var machine = Machine()
        machine.recordOperations { $0 += (1...100).map(operation) }
        _ = machine.answered("a", waits: true)
        guard case .write(var written, _) = machine.nextPass() else { return #expect(Bool(false)) }
        let capacity = written.capacity
        #expect(machine.pendingOperations.capacity < capacity, "the pass took the array")
        written.removeAll(keepingCapacity: true)
        machine.recycle(written)
        written = []
        machine.recordOperations { $0.append(operation(101)) }
        guard case .write(let second, _) = machine.nextPass() else { return #expect(Bool(false)) }
        #expect(second.map(\.sequence) == [101])
        #expect(machine.pendingOperations.capacity == capacity, "the next pass fills the array handed back")
        machine.recordOperations { $0.append(operation(102)) }
        #expect(machine.pendingOperations.capacity == capacity && machine.pendingOperations.map(\.sequence) == [102])
    }

    @Test func operationsAnInstalledSnapshotHoldsAreNotWrittenAgain() {
        var machine = Machine()
        machine.recordOperations { $0 += (1...6).map(operation) }
        #expect(machine.answered("batch", waits: true) == .waitAndStartPass)
        var held = VersionVector()
        held.recordAll(through: 4, in: LogID(origin: NodeID(trusted: "n"), epoch: 1))
        machine.dropPending(heldBy: held)
        guard case .write(let operations, let waiters) = machine.nextPass() else { return #expect(Bool(false)) }
        #expect(operations.map(\.sequence) == [5, 6] && waiters == ["batch"])
        // All of them held: nothing to write, and the answer still goes.
        machine.recordOperations { $0 += (7...8).map(operation) }
        #expect(machine.answered("next", waits: true) == .wait)
        held.recordAll(through: 8, in: LogID(origin: NodeID(trusted: "n"), epoch: 1))
        machine.dropPending(heldBy: held)
        guard case .deliver(let ready) = machine.nextPass() else { return #expect(Bool(false)) }
        #expect(ready == ["next"])
    }

    @Test func afterAFailureEveryoneWaitingIsRefusedAndTheFailureStays() {
        var machine = Machine()
        machine.recordOperations { $0.append(operation(1)) }
        _ = machine.answered("a", waits: true)
        guard case .write(_, let waiters) = machine.nextPass() else {
            Issue.record("expected a write")
            return
        }
        #expect(waiters == ["a"])
        let failure = WireError(code: .unavailable, message: "disk gone", retryable: true)
        machine.failed(failure)
        #expect(machine.failure == failure)
        // Anything that joined meanwhile is refused by the next pass, not written.
        machine.recordOperations { $0.append(operation(2)) }
        _ = machine.answered("b", waits: true)
        guard case .refuse(let refused, let error) = machine.nextPass() else {
            Issue.record("expected a refusal")
            return
        }
        #expect(refused == ["b"] && error == failure)
        // Closing afterwards keeps the storage failure, not the shutdown message.
        machine.close(with: WireError(code: .unavailable, message: "shutting down", retryable: true))
        #expect(machine.failure == failure)
    }

    @Test func closingRefusesWhatComesNext() {
        var machine = Machine()
        let closing = WireError(code: .unavailable, message: "shutting down", retryable: true)
        machine.close(with: closing)
        #expect(machine.failure == closing)
        machine.recordOperations { $0.append(operation(1)) }
        #expect(machine.answered("late", waits: true) == .waitAndStartPass)
        guard case .refuse(let refused, _) = machine.nextPass() else {
            Issue.record("expected a refusal")
            return
        }
        #expect(refused == ["late"])
    }
}
