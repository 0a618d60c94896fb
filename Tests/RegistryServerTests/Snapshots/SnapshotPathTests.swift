import RegistryCore
@testable import RegistryServer
import RegistryStorage
import RegistryTestSupport
import RegistryWire
import Testing

/// The snapshot data path end to end, on the simulated disk: a state becomes records, bytes and
/// a file, and comes back the same state with the same metadata. (registryd does not take
/// snapshots yet; this is the path it will use.)
@Suite struct SnapshotPathTests {
    /// A state with devices, merges, several apps and two vendors, from seeded registrations.
    func sampleState(seed: UInt64, count: Int = 2_000, claimSeed: UInt64? = nil) throws -> RegistryState {
        var registrations = try SampleRegistrations(seed: seed, poolSize: count / 3)
        var state = RegistryState(claimSeed: claimSeed)
        var clock = HybridLogicalClock()
        for step in 0..<count {
            let registration = try registrations.next()
            let now = clock.tick(wallMillis: UInt64(1_000 + step))
            _ = state.register(registration, at: now, origin: NodeID(trusted: "node-a")) { _ in registrations.mint(at: now) }
        }
        return state
    }

    func writeSnapshot(_ state: RegistryState, metadata: SnapshotMetadata, label: UInt64, on fs: some FileSystem) throws -> String {
        let writer = try SnapshotWriter(fs: fs, directory: "/data", label: label, metadata: SnapshotCodec.encode(metadata))
        var bytes = [UInt8]()
        try state.forEachSnapshotRecord { record in
            SnapshotCodec.encode(record, into: &bytes)
            try bytes.withUnsafeBytes { try writer.append($0) }
        }
        return try writer.finish()
    }

    func readSnapshot(_ path: String, on fs: some FileSystem) throws -> (SnapshotMetadata, RegistryState) {
        var metadata: SnapshotMetadata?
        var restorer = RegistryState.Restorer()
        var failure: (any Error)?
        try SnapshotFile.read(
            path, on: fs,
            metadata: { bytes in
                do { metadata = try SnapshotCodec.decodeMetadata(bytes) } catch { failure = error }
            },
            record: { raw in
                guard failure == nil else { return }
                do { try restorer.add(try SnapshotCodec.decodeRecord(raw)) } catch { failure = error }
            })
        if let failure { throw failure }
        return (try #require(metadata), try restorer.finish())
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aStateWrittenToASnapshotComesBackTheSame(seed: UInt64) throws {
        let state = try sampleState(seed: seed)
        #expect(state.aliasCount > 0)
        var vector = VersionVector()
        vector.recordAll(through: 2_000, in: LogID(origin: NodeID(trusted: "node-a"), epoch: 9))
        vector.recordAll(through: 17, in: LogID(origin: NodeID(trusted: "node-b"), epoch: 2))
        let metadata = SnapshotMetadata(
            nodeID: NodeID(trusted: "node-a"), epoch: 9, clock: HLCTimestamp(millis: 3_000, counter: 4), versionVector: vector,
            devices: UInt64(state.deviceCount + state.aliasCount))
        let fs = SimulatedFileSystem()
        let path = try writeSnapshot(state, metadata: metadata, label: 2_017, on: fs)
        let (readMetadata, restored) = try readSnapshot(path, on: fs)
        #expect(readMetadata == metadata)
        #expect(restored.snapshot() == state.snapshot())
    }

    /// A header's device count sizes the restored state's indexes no further than the file's
    /// bytes could hold devices: a header claiming 2^30 devices over a handful of records had the
    /// loader map tens of gigabytes of index tables.
    @Test func aHeaderThatClaimsMoreDevicesThanTheFileHoldsSizesForTheFile() throws {
        let state = try sampleState(seed: 4, count: 300)
        let metadata = SnapshotMetadata(
            nodeID: NodeID(trusted: "node-a"), epoch: 9, clock: HLCTimestamp(millis: 3_000, counter: 0), versionVector: VersionVector(),
            devices: 1 << 30)
        let fs = SimulatedFileSystem()
        let path = try writeSnapshot(state, metadata: metadata, label: 300, on: fs)
        let fileBytes = try fs.readAll(path).count
        let loaded = try SnapshotStore.load(path: path, label: 300, on: fs, expectedDevices: 0, claimSeed: nil)
        #expect(loaded.registry.snapshot() == state.snapshot())
        let sized = RegistryState(expectedDevices: SnapshotStore.mostDevices(inFileOf: fileBytes)).indexCapacities
        #expect(loaded.registry.indexCapacities.devices <= sized.devices && loaded.registry.indexCapacities.claims <= sized.claims)
        #expect(loaded.registry.indexCapacities.devices < RegistryState(expectedDevices: 1 << 20).indexCapacities.devices)
    }

    /// The node's loader (``SnapshotStore``) hands devices and claims to the restorer as their
    /// fields, in chunks, and the other records as records: a state of more devices and claims
    /// than a chunk holds comes back the same, and records out of their order are still refused.
    @Test func theLoaderRestoresChunksOfDevicesAndClaimsInTheirOrder() throws {
        let state = try sampleState(seed: 21, count: 60_000)
        #expect(state.slotCount > SnapshotStore.chunkRecords && state.claimCount > 2 * SnapshotStore.chunkRecords)
        let metadata = SnapshotMetadata(
            nodeID: NodeID(trusted: "node-a"), epoch: 9, clock: HLCTimestamp(millis: 3_000, counter: 0), versionVector: VersionVector(),
            devices: UInt64(state.slotCount))
        let fs = SimulatedFileSystem()
        let path = try writeSnapshot(state, metadata: metadata, label: 60_000, on: fs)
        let loaded = try SnapshotStore.load(path: path, label: 60_000, on: fs, expectedDevices: 0, claimSeed: nil)
        #expect(loaded.metadata == metadata)
        #expect(loaded.registry.snapshot() == state.snapshot())

        let names: [SnapshotRecord] = [.origin(NodeID(trusted: "node-a")), .vendor(Vendor(trusted: "com.v"))]
        func device(_ low: UInt64) -> SnapshotRecord {
            .device(id: DeviceID(UUID128(high: 1, low: low)), created: HLCTimestamp(millis: low, counter: 0), origin: 0, vendor: 0)
        }
        let claim = SnapshotRecord.claim(vendor: 0, identifier: Identifier(kind: .idfv, value: UUID128(high: 5, low: 5)), owner: 0)
        let writer = try SnapshotWriter(fs: fs, directory: "/data", label: 7, metadata: SnapshotCodec.encode(metadata))
        var bytes = [UInt8]()
        for record in names + [device(1), claim, device(2)] {
            SnapshotCodec.encode(record, into: &bytes)
            try bytes.withUnsafeBytes { try writer.append($0) }
        }
        let disordered = try writer.finish()
        #expect {
            _ = try SnapshotStore.load(path: disordered, label: 7, on: fs, expectedDevices: 0, claimSeed: nil)
        } throws: { error in
            guard case StorageError.corrupt(let reason) = error else { return false }
            return reason.contains("comes after the claims records")
        }
    }

    /// A snapshot lists its claims in the claim index's order, whichever walk reads the index:
    /// its `forEach`, or a forked child's drain, which lets go of the pages as it reads. Both
    /// give the same records in the same order.
    @Test func claimsComeInTheIndexOrderFromEitherWalk() throws {
        var plain = [SnapshotRecord]()
        try sampleState(seed: 11, count: 15_000, claimSeed: 0xABC).forEachSnapshotRecord { plain.append($0) }
        // The drain lets go of the indexes' pages: a state of its own (the same registrations
        // into an index of the same seed), not used after.
        var drained = [SnapshotRecord]()
        var toldAfterReading = false
        try sampleState(seed: 11, count: 15_000, claimSeed: 0xABC).forEachSnapshotRecordInForkedChild(
            afterReadingIndexes: { toldAfterReading = true }
        ) {
            drained.append($0)
        }
        #expect(toldAfterReading)
        #expect(plain.filter { if case .claim = $0 { true } else { false } }.count > 10_000)
        #expect(drained == plain)
    }

    @Test func damagedRecordsThatPassTheirChecksumAreStillRefused() throws {
        var bytes = [UInt8]()
        SnapshotCodec.encode(.claim(vendor: 3, identifier: Identifier(kind: .idfv, value: UUID128(high: 1, low: 1)), owner: 2), into: &bytes)
        #expect(throws: Never.self) { try bytes.withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
        var unknownKind = bytes
        unknownKind[1 + 4] = 9  // the identifier kind, after the tag and the vendor number
        #expect(throws: CodecError.self) { try unknownKind.withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
        #expect(throws: CodecError.self) { try Array(bytes.dropLast()).withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
        #expect(throws: CodecError.self) { try (bytes + [0]).withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
        #expect(throws: CodecError.self) { try [UInt8(77)].withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
        var vendorBytes = [UInt8]()
        SnapshotCodec.encode(.vendor(Vendor(trusted: "com.v")), into: &vendorBytes)
        vendorBytes[3] = UInt8(ascii: " ")
        #expect(throws: CodecError.self) { try vendorBytes.withUnsafeBytes { _ = try SnapshotCodec.decodeRecord($0) } }
    }
}
