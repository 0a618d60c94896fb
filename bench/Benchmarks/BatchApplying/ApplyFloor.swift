import PeerBatchSample
import Platform
import RegistryCore
import RegistryServer
import RegistryWire

/// The least applying a batch of new devices can do, written apart from the state's indexes: for
/// each device, its ID inserted into a table of 8-byte buckets (a 32-bit tag and a value, as the
/// state's device index holds them), its two claims into a table of 24-byte buckets (an
/// identifier, its kind and a value), both with linear probing, in tables of the capacities the
/// state's indexes have and on the same huge pages; and a 56-byte record (a slot's size)
/// appended. Each insert probes to the first free bucket, as a lookup of a key the table does not
/// hold does, and stores there: every key here is new, as a first install's are. The cache lines
/// of the first eight buckets of the probes of the device `RegistryState.prefetchDistance` ahead
/// are asked for first, the most the state asks for (`BucketTable.probeBuckets`). The records go
/// to a huge-page block, where the state's slots are in 4 KiB pages from the heap.
struct ApplyFloor {
    /// One device's keys, read out of its operation before the run.
    private struct Keys {
        var device: UUID128
        var claims: (Identifier, Identifier)
    }

    private static let deviceBucketBytes = 8
    private static let claimBucketBytes = 24
    private static let recordBytes = 56

    private var blocks: [any TableBlock] = []
    private var deviceBuckets: UnsafeMutableRawPointer?
    private var claimBuckets: UnsafeMutableRawPointer?
    private var records: UnsafeMutableRawPointer?
    private var deviceCapacity = 0
    private var claimCapacity = 0
    private var recordCount = 0
    private var measured: [[Keys]] = []
    private var next = 0

    mutating func prepare() {
        // The capacities a state sized as the other benchmark's has (its tables are never written).
        let capacities = RegistryState(expectedDevices: SampleBatches.expectedDevices).indexCapacities
        (deviceCapacity, claimCapacity) = (capacities.devices, capacities.claims)
        let allocator = HugePageTableAllocator(inBackground: false)
        blocks = [
            allocator.zeroedBlock(bytes: deviceCapacity * Self.deviceBucketBytes),
            allocator.zeroedBlock(bytes: claimCapacity * Self.claimBucketBytes),
            allocator.zeroedBlock(bytes: SampleBatches.expectedDevices * Self.recordBytes),
        ]
        (deviceBuckets, claimBuckets, records) = (blocks[0].base, blocks[1].base, blocks[2].base)
        var decoder = OperationDecoder()
        for number in 0..<SampleBatches.heldBatches {
            insert(Self.keys(of: SampleBatches.batch(number, vendorPrefix: PeerBatchSample.shortPrefix, decoder: &decoder)))
        }
        measured = (0..<SampleBatches.measuredBatches).map {
            Self.keys(of: SampleBatches.batch(SampleBatches.heldBatches + $0, vendorPrefix: PeerBatchSample.shortPrefix, decoder: &decoder))
        }
        next = 0
    }

    mutating func insertNextBatch() {
        precondition(next < measured.count, "more samples than batches prepared")
        insert(measured[next])
        next += 1
    }

    private static func keys(of operations: [LoggedOperation]) -> [Keys] {
        operations.map { logged in
            guard case .registration(let op) = logged.operation, op.claims.count == 2 else { fatalError("not a first install") }
            return Keys(device: op.device.id.uuid, claims: (op.claims[0], op.claims[1]))
        }
    }

    private mutating func insert(_ batch: [Keys]) {
        let distance = RegistryState.prefetchDistance
        for index in batch.indices {
            if index + distance < batch.count {
                let ahead = batch[index + distance]
                Self.prefetch(deviceBuckets! + Self.home(Self.hash(ahead.device), deviceCapacity) * Self.deviceBucketBytes, Self.deviceBucketBytes)
                Self.prefetch(claimBuckets! + Self.home(Self.hash(ahead.claims.0), claimCapacity) * Self.claimBucketBytes, Self.claimBucketBytes)
                Self.prefetch(claimBuckets! + Self.home(Self.hash(ahead.claims.1), claimCapacity) * Self.claimBucketBytes, Self.claimBucketBytes)
            }
            let keys = batch[index]
            let value = UInt32(recordCount)
            insertDevice(Self.hash(keys.device), value)
            insertClaim(keys.claims.0, value)
            insertClaim(keys.claims.1, value)
            let record = records! + recordCount * Self.recordBytes
            record.storeBytes(of: keys.device, as: UUID128.self)
            record.storeBytes(of: UInt64(value), toByteOffset: 16, as: UInt64.self)
            recordCount += 1
        }
    }

    /// Asks for the cache lines of the eight buckets from `start` on, as the state does.
    private static func prefetch(_ start: UnsafeMutableRawPointer, _ bucketBytes: Int) {
        var line = UInt(bitPattern: start) & ~63
        while line < UInt(bitPattern: start) + UInt(8 * bucketBytes) {
            Prefetch.forWriting(UnsafeRawPointer(bitPattern: line)!)
            line += 64
        }
    }

    /// A bucket is free while its stored word (value + 1) is zero.
    private func insertDevice(_ hash: UInt64, _ value: UInt32) {
        var bucket = Self.home(hash, deviceCapacity)
        while deviceBuckets!.load(fromByteOffset: bucket * Self.deviceBucketBytes + 4, as: UInt32.self) != 0 {
            bucket = bucket + 1 == deviceCapacity ? 0 : bucket + 1
        }
        let at = deviceBuckets! + bucket * Self.deviceBucketBytes
        at.storeBytes(of: UInt32(truncatingIfNeeded: hash >> 32), as: UInt32.self)
        at.storeBytes(of: value + 1, toByteOffset: 4, as: UInt32.self)
    }

    /// Looks for the claim first, as inserting a key that may be there must.
    private func insertClaim(_ claim: Identifier, _ value: UInt32) {
        var bucket = Self.home(Self.hash(claim), claimCapacity)
        let kind = UInt32(truncatingIfNeeded: claim.kind.rawValue)
        while true {
            let at = claimBuckets! + bucket * Self.claimBucketBytes
            if at.load(fromByteOffset: 20, as: UInt32.self) == 0 {
                at.storeBytes(of: claim.value, as: UUID128.self)
                at.storeBytes(of: kind, toByteOffset: 16, as: UInt32.self)
                at.storeBytes(of: value + 1, toByteOffset: 20, as: UInt32.self)
                return
            }
            if at.load(as: UUID128.self) == claim.value, at.load(fromByteOffset: 16, as: UInt32.self) == kind { return }
            bucket = bucket + 1 == claimCapacity ? 0 : bucket + 1
        }
    }

    /// The high word of hash × capacity: any capacity, as the state's tables place.
    private static func home(_ hash: UInt64, _ capacity: Int) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(capacity)).high)
    }

    private static func hash(_ id: UUID128) -> UInt64 { mix(id.high ^ mix(id.low)) }

    private static func hash(_ claim: Identifier) -> UInt64 { mix(claim.value.high ^ mix(claim.value.low ^ UInt64(claim.kind.rawValue))) }

    private static func mix(_ value: UInt64) -> UInt64 {
        var x = value &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 32
        x = x &* 0xD6E8_FEB8_6659_FD93
        return x ^ (x >> 32)
    }
}
