import Testing
@testable import RegistryCore

/// Operations are moved many times between their decoding and their application; every case of
/// `Operation` is boxed so that each move copies one reference, not the largest case's fields.
@Suite struct OperationLayoutTests {
    @Test func anOperationIsOneReference() {
        #expect(
            MemoryLayout<Operation>.size == MemoryLayout<UnsafeRawPointer>.size,
            "Operation is \(MemoryLayout<Operation>.size) bytes: a case that is not indirect puts its fields inline, in every operation")
    }
}
