import NIOCore
import PeerBatchSample
import RegistryCore
import RegistryWire

/// The batches both benchmarks take: `PeerBatchSample` registrations (new devices, an IDFV and a
/// keychain UUID each), encoded into a peer frame and decoded by an `OperationDecoder`, as a node
/// catching up from a peer holds them before it applies them. Batch `n` is seeded with `n`, so
/// every run, and both benchmarks, take the same operations (where the state's device index puts
/// them still differs from run to run: its hash seed is random).
enum SampleBatches {
    static let operationsPerBatch = 1_024
    /// Batches applied before any is measured: the state then holds this many × 1,024 devices.
    static let heldBatches = 1_024
    /// Batches a run measures at most, one a sample.
    static let measuredBatches = 512
    /// What the state's indexes are sized for: every batch's devices and a fourth more, so that
    /// no table grows while a batch is measured (a growth's moves are another cost, which `make
    /// bench-catchup` takes in). The claim index is then at 0.37 to 0.56 load while batches are
    /// measured.
    static let expectedDevices = (heldBatches + measuredBatches) * operationsPerBatch * 5 / 4

    /// Batch `number`, decoded; its vendors are named `<vendorPrefix><N>`.
    static func batch(_ number: Int, vendorPrefix: String, decoder: inout OperationDecoder) -> [LoggedOperation] {
        let operations = PeerBatchSample.registrations(count: operationsPerBatch, seed: UInt64(number), vendorPrefix: vendorPrefix)
        var buffer = ByteBuffer()
        try! OperationBatchWriter.writeFrame(batchID: UInt64(number), operations: operations, into: &buffer)
        buffer.moveReaderIndex(forwardBy: 4)
        let decoded = buffer.readableBytesView.withContiguousStorageIfAvailable { decoder.batch(inFrame: UnsafeRawBufferPointer($0), limit: .max) }
        guard let operations = decoded??.operations, operations.count == operationsPerBatch else { fatalError("batch \(number) did not decode") }
        return operations
    }
}
