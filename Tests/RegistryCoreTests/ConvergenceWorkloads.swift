@testable import RegistryCore

/// What the workloads of the convergence tests share: how their apps present identifiers, and
/// how their nodes hear of each other's operations.
enum ConvergenceWorkloads {
    /// Identifiers as an app presents them: a keychain UUID from `pool` two times in three, and an
    /// IDFV from `pool` when there is no keychain UUID, or else one time in two.
    static func presented(from pool: [UUID128], using random: inout SplitMix64) -> [PresentedIdentifier] {
        var presented = [PresentedIdentifier]()
        if random.next() % 3 != 0 { presented.append(PresentedIdentifier(rawKind: 1, text: pool[Int(random.next() % UInt64(pool.count))].text)) }
        if presented.isEmpty || random.next() % 2 == 0 {
            presented.append(PresentedIdentifier(rawKind: 2, text: pool[Int(random.next() % UInt64(pool.count))].text))
        }
        return presented
    }

    /// One step in three, one of `states` hears of an earlier one of `operations`: replication
    /// that is partial and out of order.
    static func hearSomething(_ states: inout [RegistryState], of operations: [Operation], using random: inout SplitMix64) {
        guard random.next() % 3 == 0 else { return }
        states[Int(random.next() % UInt64(states.count))].apply(operations[Int(random.next() % UInt64(operations.count))])
    }
}
