// What a node pays to put a batch of operations on the wire to one peer, per batch of 1,024
// registrations shaped as registryload's batched first installs leave them in the journal (one
// origin, 10 vendors, an IDFV and a keychain UUID each), measured with ordo-one's package-benchmark
// (`swift package benchmark --target BatchEncoding`; docs/performance.md cites it). In one run:
// - protobuf-c's path, `PeerFrame.encodeFrame(into:)`: a message graph with a C copy of every
//   operation's origin and bytes, sized and packed through protobuf-c's descriptors;
// - `OperationBatchWriter.writeFrame`, which peer links use: the same bytes written directly;
// - the floor: the operations' bytes copied into one buffer, all a frame cannot do without. It is
//   written here, apart from the code it bounds.
import Benchmark
import NIOCore
import PeerBatchSample
import RegistryCore
import RegistryWire

/// Operations in each batch; the figures are per batch.
private let operationsPerBatch = 1_024

private let batch = PeerBatchSample.registrations(count: operationsPerBatch, seed: 47)

private let capacity = batch.reduce(64) { $0 + $1.operation.count + 48 }

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(3))

    Benchmark("PeerFrame.encodeFrame (protobuf-c), a batch of 1,024 operations") { benchmark in
        var buffer = ByteBufferAllocator().buffer(capacity: capacity)
        for _ in benchmark.scaledIterations {
            buffer.clear()
            try PeerFrame.batch(OperationBatch(batchID: 7, operations: batch)).encodeFrame(into: &buffer)
        }
        blackHole(buffer)
    }
    Benchmark("OperationBatchWriter.writeFrame, a batch of 1,024 operations") { benchmark in
        var buffer = ByteBufferAllocator().buffer(capacity: capacity)
        for _ in benchmark.scaledIterations {
            buffer.clear()
            try OperationBatchWriter.writeFrame(batchID: 7, operations: batch, into: &buffer)
        }
        blackHole(buffer)
    }
    Benchmark("floor: the bytes of 1,024 operations copied into one buffer") { benchmark in
        var buffer = ByteBufferAllocator().buffer(capacity: capacity)
        for _ in benchmark.scaledIterations {
            buffer.clear()
            for operation in batch { buffer.writeBytes(operation.operation) }
        }
        blackHole(buffer)
    }
}
