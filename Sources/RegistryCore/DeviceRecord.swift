/// One app of a vendor that registered a device, with when it was first and last seen.
public struct AppSeen: Hashable, Sendable {
    public let bundle: BundleID
    public internal(set) var firstSeen: HLCTimestamp
    public internal(set) var lastSeen: HLCTimestamp

    public init(bundle: BundleID, firstSeen: HLCTimestamp, lastSeen: HLCTimestamp) {
        self.bundle = bundle
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
    }

    /// Joins two sightings of the same app: earliest first, latest last.
    mutating func absorb(firstSeen other: HLCTimestamp, lastSeen otherLast: HLCTimestamp) {
        firstSeen = min(firstSeen, other)
        lastSeen = max(lastSeen, otherLast)
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
