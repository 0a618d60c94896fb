import RegistryCore
import RegistryWire

/// The group-commit bookkeeping of a node as a plain value: the operations applied in memory and
/// not yet durable, the answers waiting for them, whether a commit pass is running, and whether
/// storage failed. Each event returns the action the engine carries out; nothing here does I/O,
/// so every transition is tested directly (`CommitStateMachineTests`).
///
/// The durability rule it keeps: an answer that changed or observed anything not yet durable
/// waits for a commit pass that starts after it, so no client sees state a crash could take back.
struct CommitStateMachine<Waiter> {
    /// Operations applied in memory since the last pass took them.
    private(set) var pendingOperations: [LoggedOperation] = []
    /// The operations array of a pass that was written, emptied and handed back
    /// (``recycle(_:)``): the next pass's pending operations fill it, so that under a steady load
    /// two arrays take turns instead of each pass growing a new one through every size.
    private var spareOperations: [LoggedOperation] = []
    /// Answers waiting for the next pass.
    private(set) var pendingWaiters: [Waiter] = []
    /// From the moment a pass is scheduled until one finds nothing left to do.
    private(set) var isRunning = false
    /// Set once storage failed or closed; every request is refused with it from then on.
    private(set) var failure: WireError?

    /// Whether the node's memory holds operations that are not durable yet (pending, or taken
    /// by the pass that is running): whoever observes the state now must wait.
    var holdsUndurable: Bool { isRunning || !pendingOperations.isEmpty }

    /// Lets a decision append the operations it applied.
    mutating func recordOperations<Result>(_ body: (inout [LoggedOperation]) -> Result) -> Result {
        body(&pendingOperations)
    }

    /// A snapshot was installed that covers `held`: the pending operations it holds are durable
    /// in it, and are not written again (written after the journal moved on to a new file, below
    /// what that file follows on from, they would read as a hole). Their answers still wait for
    /// the next pass, which finds the rest durable.
    mutating func dropPending(heldBy held: VersionVector) {
        pendingOperations.removeAll { $0.sequence <= held[$0.log] }
    }

    /// What to do with a group's answers.
    enum AnswerAction: Equatable {
        /// Send them now: they saw only durable state.
        case deliver
        /// They wait for the pass that is running or scheduled.
        case wait
        /// They wait, and no pass runs: schedule one.
        case waitAndStartPass
    }

    /// A group was answered; `waits` says whether it changed or observed anything not durable.
    mutating func answered(_ waiter: Waiter, waits: Bool) -> AnswerAction {
        guard waits else { return .deliver }
        pendingWaiters.append(waiter)
        guard !isRunning else { return .wait }
        isRunning = true
        return .waitAndStartPass
    }

    /// What one commit pass does.
    enum PassAction {
        /// Nothing is left: the pass loop ends (a later answer schedules a new one).
        case finish
        /// Storage failed: refuse these answers with the failure.
        case refuse([Waiter], WireError)
        /// Nothing to write, and the pass before made everything these answers saw durable.
        case deliver([Waiter])
        /// Make these operations durable, then deliver the answers (``committed()``) or refuse
        /// them (``failed(_:)``).
        case write([LoggedOperation], [Waiter])
    }

    /// The running pass takes everything pending.
    mutating func nextPass() -> PassAction {
        precondition(isRunning, "a commit pass runs only when scheduled")
        guard !pendingWaiters.isEmpty || !pendingOperations.isEmpty else {
            isRunning = false
            return .finish
        }
        let (operations, waiters) = (pendingOperations, pendingWaiters)
        pendingOperations = spareOperations
        spareOperations = []
        pendingWaiters = []
        if let failure { return .refuse(waiters, failure) }
        if operations.isEmpty { return .deliver(waiters) }
        return .write(operations, waiters)
    }

    /// A pass's operations array once written and emptied, kept for a later pass to fill.
    mutating func recycle(_ emptied: [LoggedOperation]) {
        precondition(emptied.isEmpty, "only an emptied array is kept")
        if emptied.capacity > spareOperations.capacity { spareOperations = emptied }
    }

    /// Writing failed: from now on every request is refused with `failure`.
    mutating func failed(_ failure: WireError) {
        self.failure = failure
    }

    /// The node is closing: refuse what comes next with `failure`, unless storage failed first.
    mutating func close(with failure: WireError) {
        if self.failure == nil { self.failure = failure }
    }
}

extension CommitStateMachine: Sendable where Waiter: Sendable {}
