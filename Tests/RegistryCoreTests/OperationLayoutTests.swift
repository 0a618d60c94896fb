import Testing
@testable import RegistryCore

/// Every operation is as large as `Operation`'s largest inline case, and registrations, nearly
/// every operation a node logs, are moved through the commit pipeline, the journal writer and
/// the peer links: a larger case must be `indirect`, not widen them all.
@Suite struct OperationLayoutTests {
    @Test func anOperationIsNoLargerThanARegistrations() {
        #expect(
            MemoryLayout<Operation>.size <= MemoryLayout<RegistrationOp>.size + 1,
            "Operation is \(MemoryLayout<Operation>.size) bytes against a registration's \(MemoryLayout<RegistrationOp>.size): make the larger case indirect")
    }
}
