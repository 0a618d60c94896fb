import Testing
@testable import RegistryCore

/// Operations are moved many times between their decoding and their application. A registration
/// is held in place (no allocation for the commonest operation, and a copy is a copy of its bytes
/// and one retain of its merged devices); the cases larger than a registration are `indirect`,
/// so that none of them makes every operation larger.
@Suite struct OperationLayoutTests {
    @Test func aRegistrationIsHeldInPlaceAndNoOtherCaseIsLarger() {
        let operation = MemoryLayout<Operation>.size
        let registration = MemoryLayout<RegistrationOp>.size
        #expect(
            operation >= registration,
            "Operation is \(operation) bytes, less than a registration's \(registration): the registration case is boxed")
        #expect(
            operation <= registration + 1,
            "Operation is \(operation) bytes, more than a registration's \(registration) and a tag: a case larger than a registration is not `indirect`")
    }

    /// What makes a registration cheap to copy: its fields are plain data but for the merged
    /// devices. A field added or changed shows here, whatever padding it fits in.
    @Test func aRegistrationsFieldsArePlainDataButItsMergedDevices() {
        let device = DeviceRef(
            id: DeviceID(UUID128(high: 1, low: 2)), created: .zero, origin: NodeID(trusted: "node-a"), vendor: Vendor(trusted: "com.v"))
        let registration = RegistrationOp(
            device: device, bundle: try! BundleID(parsing: "com.v.app"), claims: [], merged: [], seen: .zero)
        let fields = Mirror(reflecting: registration).children.map { "\($0.label ?? "?"): \(type(of: $0.value))" }
        #expect(
            fields == [
                "device: DeviceRef", "bundle: BundleID", "claims: IdentifierList", "merged: Array<DeviceRef>", "seen: HLCTimestamp",
            ])
        #expect(_isPOD(DeviceRef.self))
        #expect(_isPOD(BundleID.self))
        #expect(_isPOD(IdentifierList.self))
        #expect(_isPOD(HLCTimestamp.self))
    }
}
