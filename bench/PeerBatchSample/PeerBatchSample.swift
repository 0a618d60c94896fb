// The peer batch the batch benchmarks measure (bench/Benchmarks/BatchEncoding, BatchDecoding and BatchApplying).
import RegistryCore
import RegistryWire

/// A batch of registrations shaped as registryload's batched first installs leave them in the
/// journal: one origin, 10 vendors of 3 apps each, an IDFV and a keychain UUID each, created and
/// seen at once, sequences from 1, 50 to a millisecond. The same `seed` gives the same batch.
public enum PeerBatchSample {
    /// registryload's default vendor prefix: its vendors (9 bytes) and bundle IDs (14) fit the
    /// 15 bytes a Swift string holds in place.
    public static let shortPrefix = "com.load"
    /// `registryload --vendor-prefix com.example-vendor`: vendors of 19 bytes and bundle IDs of
    /// 24, past the 15 a Swift string holds in place, as most real ones are.
    public static let longPrefix = "com.example-vendor"

    /// Vendors are named `<vendorPrefix><N>` and their apps `<vendorPrefix><N>.app<M>`.
    public static func registrations(count: Int, seed: UInt64, vendorPrefix: String = shortPrefix) -> [PeerOperation] {
        var generator = SplitMix64(seed: seed)
        let origin = NodeID(trusted: "node-94d1718d")
        return (1...count).map { sequence in
            let stamp = HLCTimestamp(rawValue: (1_764_000_000_000 + UInt64(sequence) / 50) << 16)
            let vendor = "\(vendorPrefix)\(generator.next() % 10)"
            let device = DeviceRef(
                id: DeviceID(UUID128(high: generator.next(), low: generator.next())), created: stamp, origin: origin,
                vendor: Vendor(trusted: vendor))
            let op = RegistrationOp(
                device: device, bundle: try! BundleID(parsing: "\(vendor).app\(generator.next() % 3)"),
                claims: [
                    Identifier(kind: .idfv, value: UUID128(high: generator.next(), low: generator.next())),
                    Identifier(kind: .keychain, value: UUID128(high: generator.next(), low: generator.next())),
                ], merged: [], seen: stamp)
            return PeerOperation(
                LoggedOperation(origin: origin, epoch: 1, sequence: UInt64(sequence), timestamp: stamp, operation: .registration(op)))
        }
    }
}
