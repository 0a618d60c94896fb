import RegistryCore
import RegistryWire

/// What a peer said in its hello that it holds: every log's sequence, and how many device
/// records (devices and aliases) and claims. A node far behind it sizes its indexes from this,
/// once, before the first operations it takes from that peer (``indexSizing(ownHolds:ownDeviceRecords:ownClaims:)``),
/// instead of growing them through every size while it catches up (docs/performance.md,
/// "Catching up into indexes sized at once").
struct PeerHoldings: Equatable, Sendable {
    let vector: VersionVector
    let deviceRecords: UInt64
    let claims: UInt64

    /// From a hello; nil when it says nothing of its counts (a node before they were sent) or
    /// names an invalid log.
    init?(_ hello: PeerHello) {
        guard hello.deviceRecords > 0 || hello.claims > 0, let vector = try? VersionVector(positions: hello.versionVector) else { return nil }
        self.init(vector: vector, deviceRecords: hello.deviceRecords, claims: hello.claims)
    }

    init(vector: VersionVector, deviceRecords: UInt64, claims: UInt64) {
        self.vector = vector
        self.deviceRecords = deviceRecords
        self.claims = claims
    }

    /// Claims an operation is taken to add, for the bound below: a first install's keychain UUID
    /// and IDFV, what `--expected-devices` sizes for too.
    static let claimsPerOperation: UInt64 = 2

    /// The device records and claims a node holding `ownHolds`, `ownDeviceRecords` and
    /// `ownClaims` should size its indexes for before taking this peer's operations: what the
    /// peer holds, but no more than what the operations it lacks would add if each were a first
    /// install (one device record and ``claimsPerOperation`` claims), so that a node slightly
    /// behind a big peer sizes for nothing. Only an estimate: a registration that merges devices
    /// this node has not seen, or a clone, adds more, and the indexes then grow as usual past
    /// it. Nil when that is no more than the node holds. The indexes act only on sizes past
    /// their next growth (``RegistryState/reserve(slots:claims:)``).
    ///
    /// A peer's word reserves no more than `tableBytes` of index tables
    /// (``RegistryState/indexTableBytes(slots:claims:)``): both counts are halved until their
    /// tables fit. A hello that claims more than the machine could hold (a buggy peer, or fake
    /// counts with a log far ahead) would otherwise have the node map and zero tables past its
    /// memory; past the bound the indexes grow as operations arrive, as without a sizing.
    func indexSizing(
        ownHolds: VersionVector, ownDeviceRecords: Int, ownClaims: Int, tableBytes: Int = .max
    ) -> (deviceRecords: Int, claims: Int)? {
        let missing = vector.operationsAhead(of: ownHolds)
        guard missing > 0 else { return nil }
        func bounded(_ peer: UInt64, own: Int, perOperation: UInt64) -> Int {
            let (added, tooMany) = missing.multipliedReportingOverflow(by: perOperation)
            let (most, beyond) = UInt64(own).addingReportingOverflow(tooMany ? .max : added)
            return Int(clamping: min(peer, beyond ? .max : most))
        }
        var records = bounded(deviceRecords, own: ownDeviceRecords, perOperation: 1)
        var claims = bounded(claims, own: ownClaims, perOperation: Self.claimsPerOperation)
        while records > ownDeviceRecords || claims > ownClaims, RegistryState.indexTableBytes(slots: records, claims: claims) > tableBytes {
            (records, claims) = (max(ownDeviceRecords, records / 2), max(ownClaims, claims / 2))
        }
        guard records > ownDeviceRecords || claims > ownClaims else { return nil }
        return (max(records, ownDeviceRecords), max(claims, ownClaims))
    }
}
