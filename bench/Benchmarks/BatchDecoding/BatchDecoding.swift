// What a node pays to read a peer's batch, per batch of 1,024 registrations shaped as
// registryload's batched first installs leave them (one origin, 10 vendors of 3 apps each, an IDFV
// and a keychain UUID each), measured with ordo-one's package-benchmark (`swift package benchmark
// --target BatchDecoding`; docs/performance.md cites it). In one run:
// - `OperationDecoder.batch(inFrame:limit:)`, which a peer session runs on every batch frame, one
//   decoder kept across batches as a session keeps it (its memo of texts warm);
// - the same with vendors and bundle IDs past the 15 bytes a Swift string holds in place
//   (`PeerBatchSample.longPrefix`), as most real ones are;
// - the floor: every field of the frame walked, by the wire format alone, building nothing
//   (bench/WireWalk, written apart from the decoder).
import Benchmark
import NIOCore
import PeerBatchSample
import RegistryCore
import RegistryWire
import WireWalk

/// Operations in each batch; the figures are per batch.
private let operationsPerBatch = 1_024

/// The frame's payload (no length prefix), as a peer session hands it to the decoder.
private func framePayload(vendorPrefix: String) -> [UInt8] {
    let operations = PeerBatchSample.registrations(count: operationsPerBatch, seed: 53, vendorPrefix: vendorPrefix)
    var buffer = ByteBuffer()
    try! OperationBatchWriter.writeFrame(batchID: 7, operations: operations, into: &buffer)
    buffer.moveReaderIndex(forwardBy: 4)
    return Array(buffer.readableBytesView)
}

private let payload = framePayload(vendorPrefix: PeerBatchSample.shortPrefix)
private let longNamesPayload = framePayload(vendorPrefix: PeerBatchSample.longPrefix)

/// PeerFrame > OperationBatch > PeerOperation > Operation > RegistrationOp > DeviceRef and
/// ClaimedIdentifier: the fields that hold messages at each depth (Protos/registry/v1).
private let nestedMessages: [[UInt64]] = [[3], [2], [5], [1], [1, 3, 4]]

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(3))

    for (name, frame) in [("", payload), (", names past 15 bytes", longNamesPayload)] {
        Benchmark("OperationDecoder.batch, a batch of 1,024 operations\(name)") { benchmark in
            var decoder = OperationDecoder()
            for _ in benchmark.scaledIterations {
                let batch = frame.withUnsafeBytes { decoder.batch(inFrame: $0, limit: .max) }
                precondition(batch?.operations.count == operationsPerBatch, "the batch did not decode")
                blackHole(batch)
            }
        }
    }
    Benchmark("floor: every field of a batch of 1,024 operations walked") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(payload.withUnsafeBytes { WireWalk.walk($0, messages: nestedMessages) })
        }
    }
}
