/// One app of a vendor that registered a device, with when it was first and last seen.
public struct AppSeen: Hashable, Sendable {
    public let bundle: BundleID
    public let firstSeen: HLCTimestamp
    public let lastSeen: HLCTimestamp

    public init(bundle: BundleID, firstSeen: HLCTimestamp, lastSeen: HLCTimestamp) {
        self.bundle = bundle
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
    }
}

/// The canonical record of a device, as Resolve and Lookup answer it.
public struct DeviceRecord: Hashable, Sendable {
    /// The canonical device.
    public let device: DeviceRef
    /// Sorted by bundle.
    public let apps: [AppSeen]
    /// Devices merged into this one, sorted.
    public let aliases: [DeviceID]

    public init(device: DeviceRef, apps: [AppSeen], aliases: [DeviceID]) {
        self.device = device
        self.apps = apps
        self.aliases = aliases
    }
}

/// What a registration did, as the caller is told.
public struct RegistrationOutcome: Hashable, Sendable {
    /// The canonical device.
    public let device: DeviceID
    public let created: Bool
    public let vendor: Vendor
    /// Devices the presented identifiers led to that are now aliases of `device`, sorted.
    public let replaced: [DeviceID]
    /// Identifiers ignored by the identity rules.
    public let rejected: [PresentedIdentifier]
}
