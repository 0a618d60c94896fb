/// A device erased at its vendor's or an operator's request, as it is logged and replicated: a
/// tombstone on the device's merge set.
///
/// The rule (`docs/identity.md`, "Erasure"): a device is *gone* when its merge set holds a
/// device that a forget named. Merge sets only grow and tombstones only accumulate, so which
/// devices are gone depends on the set of operations, never on their order. A gone set keeps its
/// device IDs and the claims it held (so that no operation arriving late brings it back), and
/// loses its apps and its binding changes.
public struct ForgetOp: Hashable, Sendable {
    /// The device as the node that accepted the forget resolved it (its canonical device then).
    public let device: DeviceID
    /// Its vendor.
    public let vendor: Vendor

    public init(device: DeviceID, vendor: Vendor) {
        self.device = device
        self.vendor = vendor
    }
}
