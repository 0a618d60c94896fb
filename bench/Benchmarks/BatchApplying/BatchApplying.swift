// What a node's state pays to apply a peer's batch, per batch of 1,024 registrations of new
// devices (as a node catching up takes them), measured with ordo-one's package-benchmark
// (`swift package benchmark --target BatchApplying`; docs/performance.md cites it). The state
// holds 1,048,576 devices when the first batch is measured, on the tables a node's state has
// (huge pages), sized so that none grows while a batch is measured. In one run:
// - `RegistryState.apply(_:)` on each operation, the buckets of the one
//   `RegistryState.prefetchDistance` ahead asked for first (`RegistryState.prefetch(for:)`), as
//   `NodeState.applyRemoteBatch` and the journal's replay do it;
// - the same with vendors and bundle IDs past the 15 bytes a Swift string holds in place
//   (`PeerBatchSample.longPrefix`), as most real ones are, on a state of its own;
// - the floor: the same device IDs and claims inserted into two bare open-addressing tables of
//   the same sizes and bucket widths, and a record of a slot's size appended for each device
//   (ApplyFloor.swift, written apart from the state's indexes).
import Benchmark
import PeerBatchSample
import RegistryCore
import RegistryServer
import RegistryWire
import Synchronization

/// The state and the batches still to apply; each sample takes the next batch.
private struct StateFixture {
    /// Vendors are named `<vendorPrefix><N>`, apps `<vendorPrefix><N>.app<M>`.
    let vendorPrefix: String
    var state = RegistryState(expectedDevices: 0)
    var batches: [[LoggedOperation]] = []
    var next = 0

    mutating func prepare() {
        state = RegistryState(
            expectedDevices: SampleBatches.expectedDevices, claimSeed: 1, tables: HugePageTableAllocator(inBackground: false))
        var decoder = OperationDecoder()
        for number in 0..<SampleBatches.heldBatches {
            Self.apply(SampleBatches.batch(number, vendorPrefix: vendorPrefix, decoder: &decoder), to: &state)
        }
        batches = (0..<SampleBatches.measuredBatches).map { SampleBatches.batch(SampleBatches.heldBatches + $0, vendorPrefix: vendorPrefix, decoder: &decoder) }
        next = 0
    }

    /// The loop of `NodeState.applyRemoteBatch` and `Replayer.applyInOrder`, without their
    /// checks of sequences and clocks.
    static func apply(_ operations: [LoggedOperation], to state: inout RegistryState) {
        for index in operations.indices {
            if index + RegistryState.prefetchDistance < operations.count {
                state.prefetch(for: operations[index + RegistryState.prefetchDistance].operation)
            }
            state.apply(operations[index].operation)
        }
    }
}

/// One state for each vendor prefix, in `prefixes`' order.
private let prefixes = [("", PeerBatchSample.shortPrefix), (", names past 15 bytes", PeerBatchSample.longPrefix)]
private let stateFixtures = Mutex(prefixes.map { StateFixture(vendorPrefix: $0.1) })
private let floorFixture = Mutex(ApplyFloor())

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], warmupIterations: 0, maxDuration: .seconds(10), maxIterations: SampleBatches.measuredBatches)

    for (index, (name, _)) in prefixes.enumerated() {
        Benchmark(
            "RegistryState.apply, a batch of 1,024 new devices\(name)", configuration: configuration,
            closure: { benchmark in
                stateFixtures.withLock { fixtures in
                    for _ in benchmark.scaledIterations {
                        precondition(fixtures[index].next < fixtures[index].batches.count, "more samples than batches prepared")
                        let batch = fixtures[index].batches[fixtures[index].next]
                        benchmark.startMeasurement()
                        StateFixture.apply(batch, to: &fixtures[index].state)
                        benchmark.stopMeasurement()
                        fixtures[index].next += 1
                    }
                }
            },
            setup: { stateFixtures.withLock { $0[index].prepare() } })
    }

    Benchmark(
        "floor: the same devices and claims inserted into bare tables", configuration: configuration,
        closure: { benchmark in
            floorFixture.withLock { floor in
                for _ in benchmark.scaledIterations {
                    benchmark.startMeasurement()
                    floor.insertNextBatch()
                    benchmark.stopMeasurement()
                }
            }
        },
        setup: { floorFixture.withLock { $0.prepare() } })
}
