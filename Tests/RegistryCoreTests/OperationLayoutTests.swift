import Testing
@testable import RegistryCore

/// Operations are moved many times between their decoding and their application; `Operation` is
/// an `indirect` enum so that each move takes one reference, not the largest case's fields.
@Suite struct OperationLayoutTests {
    @Test func anOperationIsOneReference() {
        #expect(
            MemoryLayout<Operation>.size == MemoryLayout<UnsafeRawPointer>.size,
            "Operation is \(MemoryLayout<Operation>.size) bytes: an enum that is not `indirect` holds its largest case inline, in every operation")
    }
}
