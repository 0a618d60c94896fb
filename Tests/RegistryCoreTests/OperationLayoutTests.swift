import Testing
@testable import RegistryCore

/// Operations are moved many times between their decoding and their application. A registration
/// is held in place (no allocation for the commonest operation, and its copies are copies of plain
/// bytes); every other case is `indirect`, so none of them makes every operation larger.
@Suite struct OperationLayoutTests {
    @Test func aRegistrationIsHeldInPlaceAndNoOtherCaseIsLarger() {
        let operation = MemoryLayout<Operation>.size
        let registration = MemoryLayout<RegistrationOp>.size
        #expect(
            operation >= registration,
            "Operation is \(operation) bytes, less than a registration's \(registration): the registration case is boxed")
        #expect(
            operation <= registration + 1,
            "Operation is \(operation) bytes, more than a registration's \(registration) and a tag: a case that is not `indirect` holds more than a registration")
    }

    @Test func aRegistrationsPartsArePlainDataButItsMergedDevices() {
        #expect(_isPOD(DeviceRef.self))
        #expect(_isPOD(BundleID.self))
        #expect(_isPOD(IdentifierList.self))
        #expect(_isPOD(HLCTimestamp.self))
        #expect(MemoryLayout<RegistrationOp>.size == MemoryLayout<RegistrationOpParts>.size)
    }
}

/// RegistrationOp's stored properties, in order: a registration holding anything more would make
/// `aRegistrationsPartsArePlainDataButItsMergedDevices` fail.
private struct RegistrationOpParts {
    let device: DeviceRef
    let bundle: BundleID
    let claims: IdentifierList
    let merged: [DeviceRef]
    let seen: HLCTimestamp
}
