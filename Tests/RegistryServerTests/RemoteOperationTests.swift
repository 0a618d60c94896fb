import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

/// The one path by which another node's operation enters a node's state (``NodeState/applyRemote(_:wallMillis:)``).
@Suite struct RemoteOperationTests {
    func makeState() throws -> NodeState {
        NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: "node-a"), epoch: 1, nextSequence: 1, rules: try VendorRules(),
            limits: Limits(maxFrameBytes: 1 << 20, maxBatchSize: 10, maxInFlight: 8))
    }

    /// An operation from node-b's log at `sequence`, registering a device of its own.
    func remote(_ sequence: UInt64, millis: UInt64 = 2_000) throws -> LoggedOperation {
        let stamp = HLCTimestamp(millis: millis, counter: 0)
        let device = DeviceRef(
            id: DeviceID(UUID128(high: 0xB, low: sequence)), created: stamp, origin: NodeID(trusted: "node-b"),
            vendor: Vendor(trusted: "com.v"))
        let op = RegistrationOp(
            device: device, bundle: try BundleID(parsing: "com.v.a"),
            claims: [Identifier(kind: .idfv, value: UUID128(high: 0xC, low: sequence))], merged: [], seen: stamp)
        return LoggedOperation(
            origin: NodeID(trusted: "node-b"), epoch: 4, sequence: sequence, timestamp: stamp, operation: .registration(op))
    }

    @Test func remoteOperationsAreAppliedInOrderDuplicatesSkippedAndGapsHeldBack() throws {
        var state = try makeState()
        let log = LogID(origin: NodeID(trusted: "node-b"), epoch: 4)
        #expect(state.applyRemote(try remote(2), wallMillis: 1_000) == .gap(missing: 1...1))
        #expect(state.registry.deviceCount == 0 && state.versionVector[log] == 0, "a gap changes nothing")
        #expect(state.applyRemote(try remote(1), wallMillis: 1_000) == .applied)
        #expect(state.applyRemote(try remote(2), wallMillis: 1_000) == .applied)
        #expect(state.applyRemote(try remote(1), wallMillis: 1_000) == .duplicate)
        #expect(state.registry.deviceCount == 2 && state.versionVector[log] == 2)
        // The clock observed the remote timestamps: it is past them.
        #expect(state.clock.last > HLCTimestamp(millis: 2_000, counter: 0))
    }

    @Test func aRemoteTimestampTooFarAheadIsRefusedAndChangesNothing() throws {
        var state = try makeState()
        let outcome = state.applyRemote(try remote(1, millis: 10_000_000), wallMillis: 1_000)
        guard case .clockRefused = outcome else {
            Issue.record("expected a refusal, got \(outcome)")
            return
        }
        #expect(state.registry.deviceCount == 0 && state.versionVector.logs.isEmpty)
    }

    @Test func theVersionVectorShowsTheNodesOwnLogAndEchoesOfItAreDuplicates() throws {
        var state = try makeState()
        var operations = [LoggedOperation]()
        var generator = SplitMix64(seed: 1)
        for idfv in [idfv1, idfv2] {
            _ = state.handle(
                ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv))), wallMillis: 1_000,
                generator: &generator, operations: &operations)
        }
        #expect(state.versionVector.logs.map { "\($0.log)=\($0.sequence)" } == ["node-a/1=2"])
        #expect(state.applyRemote(operations[0], wallMillis: 1_000) == .duplicate)
        #expect(state.applyRemote(operations[1], wallMillis: 1_000) == .duplicate)
        #expect(state.registry.deviceCount == 2)
    }

    @Test func aBatchIsAppliedWholeOrRefusedWithNothingApplied() throws {
        var state = try makeState()
        let log = LogID(origin: NodeID(trusted: "node-b"), epoch: 4)
        var applied = [LoggedOperation]()
        // A gap after an admissible operation: nothing of the batch is applied.
        let gap = state.applyRemoteBatch([try remote(1), try remote(3)], wallMillis: 2_000, applied: &applied)
        #expect(gap == .gap(log: log, missing: 2...2) && applied.isEmpty && state.registry.deviceCount == 0)
        // A timestamp too far ahead, after an admissible one.
        let skew = state.applyRemoteBatch([try remote(1), try remote(2, millis: 10_000_000)], wallMillis: 2_000, applied: &applied)
        guard case .clockSkew = skew else {
            Issue.record("expected clock skew, got \(String(describing: skew))")
            return
        }
        #expect(applied.isEmpty && state.registry.deviceCount == 0 && state.versionVector[log] == 0)
        // An operation of the node's own log that it never wrote.
        let own = LoggedOperation(
            origin: NodeID(trusted: "node-a"), epoch: 1, sequence: 1, timestamp: HLCTimestamp(millis: 2_000, counter: 0),
            operation: try remote(1).operation)
        #expect(state.applyRemoteBatch([own], wallMillis: 2_000, applied: &applied) == .unwrittenOwnOperation(sequence: 1, next: 1))
        // Duplicates inside an admissible batch are skipped, the rest applied in order.
        #expect(state.applyRemoteBatch([try remote(1), try remote(1), try remote(2)], wallMillis: 2_000, applied: &applied) == nil)
        #expect(applied.map(\.sequence) == [1, 2] && state.versionVector[log] == 2 && state.registry.deviceCount == 2)
    }

    /// A batch applied in part hands over the operations applied with their bytes as they came,
    /// copied out of the batch's: the records kept for the peer links slice them, and must not
    /// keep the whole batch's bytes in memory for a few of its operations. One applied whole
    /// hands over the batch's own bytes, whatever `applied` held before.
    @Test func aBatchAppliedInPartKeepsItsOperationsBytesApartFromTheBatchs() throws {
        var state = try makeState()
        var applied = [LoggedOperation]()
        // A batch as a peer's frame brings it: every operation's bytes a slice of one array, but
        // those at `bare`, which came without (as one this node made would).
        func batch(_ made: [LoggedOperation], bare: Set<Int> = []) -> (frame: [UInt8], operations: [LoggedOperation]) {
            var frame = [UInt8](repeating: 0xEE, count: 7)
            var spans = [Range<Int>?]()
            for (index, operation) in made.enumerated() {
                guard !bare.contains(index) else {
                    spans.append(nil)
                    continue
                }
                let encoded = OperationCodec.encode(operation.operation)
                spans.append(frame.count..<frame.count + encoded.count)
                frame += encoded + [0xEE]
            }
            let operations = zip(made, spans).map { operation, span in
                LoggedOperation(
                    origin: operation.origin, epoch: operation.epoch, sequence: operation.sequence, timestamp: operation.timestamp,
                    operation: operation.operation, encoded: span.map { frame[$0] })
            }
            return (frame, operations)
        }
        func lies(_ slice: ArraySlice<UInt8>?, in frame: [UInt8]) -> Bool {
            guard let slice else { return false }
            return slice.withUnsafeBytes { bytes in
                frame.withUnsafeBytes { whole in bytes.baseAddress! >= whole.baseAddress! && bytes.baseAddress! < whole.baseAddress! + whole.count }
            }
        }
        func bytes(_ operations: some Collection<LoggedOperation>) -> [[UInt8]?] { operations.map { $0.encoded.map(Array.init) } }

        let whole = batch(try (1...3).map { try remote($0) })
        #expect(state.applyRemoteBatch(whole.operations, wallMillis: 3_000, applied: &applied) == nil)
        #expect(applied.allSatisfy { lies($0.encoded, in: whole.frame) }, "a batch applied whole is handed over as it is")
        // Operations 2 and 3 are held already: they are skipped, and 4 and 5 applied.
        applied = []
        let part = batch(try (2...5).map { try remote($0) })
        #expect(state.applyRemoteBatch(part.operations, wallMillis: 3_000, applied: &applied) == nil)
        #expect(applied == Array(part.operations[2...]) && bytes(applied) == bytes(part.operations[2...]))
        #expect(applied.allSatisfy { !lies($0.encoded, in: part.frame) }, "the bytes of operations applied in part are copied out")
        // Two ranges applied (node-c's 1 comes twice), one operation without bytes among them, after
        // what `applied` held.
        let node = "node-c"
        let parts = batch(
            [try remote(5), try remote(6), try remote(1, of: node, shared: nil), try remote(1, of: node, shared: nil), try remote(2, of: node, shared: nil)],
            bare: [1])
        let held = applied
        #expect(state.applyRemoteBatch(parts.operations, wallMillis: 3_000, applied: &applied) == nil)
        let expected = [parts.operations[1], parts.operations[2], parts.operations[4]]
        #expect(applied == held + expected && bytes(applied.dropFirst(held.count)) == bytes(expected))
        #expect(applied.dropFirst(held.count).allSatisfy { !lies($0.encoded, in: parts.frame) })
        // A batch applied whole after what `applied` held: its own bytes still.
        let next = batch(try (7...8).map { try remote($0) })
        let before = applied.count
        #expect(state.applyRemoteBatch(next.operations, wallMillis: 3_000, applied: &applied) == nil)
        #expect(applied.count == before + 2 && applied.dropFirst(before).allSatisfy { lies($0.encoded, in: next.frame) })
    }

    /// A batch applied whole is what `applied` gets, after what it held.
    @Test func aBatchAppliedWholeIsAppendedWhole() throws {
        var state = try makeState()
        var applied = [LoggedOperation]()
        let first = try (1...5).map { try remote($0, of: "node-b", shared: nil) }
        #expect(state.applyRemoteBatch(first, wallMillis: 3_000, applied: &applied) == nil)
        #expect(applied == first)
        let second = try (6...8).map { try remote($0, of: "node-b", shared: nil) } + (1...2).map { try remote($0, of: "node-c", shared: 6) }
        #expect(state.applyRemoteBatch(second, wallMillis: 3_000, applied: &applied) == nil)
        #expect(applied == first + second)
        #expect(state.versionVector[LogID(origin: NodeID(trusted: "node-c"), epoch: 4)] == 2)
    }

    /// Node `origin`'s operation at `sequence`: a device of its own, whose IDFV sometimes repeats
    /// another log's (`shared`), so that batches merge devices too.
    func remote(_ sequence: UInt64, of origin: String, shared: UInt64?) throws -> LoggedOperation {
        let stamp = HLCTimestamp(millis: 2_000 + sequence, counter: 0)
        let node = NodeID(trusted: origin)
        let device = DeviceRef(
            id: DeviceID(UUID128(high: UInt64(origin.utf8.last!), low: sequence)), created: stamp, origin: node, vendor: Vendor(trusted: "com.v"))
        let idfv = UUID128(high: 0xC, low: shared ?? (UInt64(origin.utf8.last!) << 32 | sequence))
        let op = RegistrationOp(
            device: device, bundle: try BundleID(parsing: "com.v.a"), claims: [Identifier(kind: .idfv, value: idfv)], merged: [],
            seen: stamp)
        return LoggedOperation(origin: node, epoch: 4, sequence: sequence, timestamp: stamp, operation: .registration(op))
    }

    /// The oracle: an admissible batch changes the state as ``NodeState/applyRemote(_:wallMillis:)``
    /// does applied to each of its operations in turn, whatever its runs: several logs
    /// interleaved, duplicates, echoes of the node's own log, more operations than the prefetch
    /// distance.
    @Test(arguments: [1, 2, 3] as [UInt64]) func anAdmissibleBatchDoesWhatItsOperationsDoOneByOne(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for trial in 0..<50 {
            var batched = try makeState()
            var generator = SplitMix64(seed: seed)
            var own = [LoggedOperation]()
            for idfv in [idfv1, idfv2] {
                _ = batched.handle(
                    ClientFrame(requestID: 1, body: .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv))), wallMillis: 1_000,
                    generator: &generator, operations: &own)
            }
            let held = ["node-b": random.next() % 10, "node-c": random.next() % 10]
            for origin in ["node-b", "node-c"] {
                for sequence in stride(from: 1, through: held[origin]!, by: 1) {
                    _ = batched.applyRemote(try remote(sequence, of: origin, shared: nil), wallMillis: 3_000)
                }
            }
            var oneByOne = batched
            // Each log's part: from a little before what is held (duplicates) to some way past it.
            var parts = [String: [LoggedOperation]]()
            for origin in ["node-b", "node-c"] {
                let first = max(1, held[origin]! - min(held[origin]!, random.next() % 3))
                let last = held[origin]! + 1 + random.next() % 20
                parts[origin] = try (first...last).map { sequence in
                    try remote(sequence, of: origin, shared: random.next() % 4 == 0 ? random.next() % 8 : nil)
                }
            }
            parts["node-a"] = own
            // Interleaved in runs of random length, each log's operations in order.
            var batch = [LoggedOperation]()
            while parts.values.contains(where: { !$0.isEmpty }) {
                let origins = parts.keys.sorted().filter { !parts[$0]!.isEmpty }
                let origin = origins[Int(random.next() % UInt64(origins.count))]
                let run = min(parts[origin]!.count, 1 + Int(random.next() % 12))
                batch += parts[origin]!.prefix(run)
                parts[origin]!.removeFirst(run)
            }

            var applied = [LoggedOperation]()
            #expect(batched.applyRemoteBatch(batch, wallMillis: 3_000, applied: &applied) == nil, "trial \(trial)")
            var expectedApplied = [LoggedOperation]()
            for operation in batch where oneByOne.applyRemote(operation, wallMillis: 3_000) == .applied {
                expectedApplied.append(operation)
            }
            #expect(applied == expectedApplied, "trial \(trial)")
            #expect(batched.versionVector == oneByOne.versionVector, "trial \(trial)")
            #expect(batched.registry.snapshot() == oneByOne.registry.snapshot(), "trial \(trial)")
            #expect(batched.clock.last == oneByOne.clock.last, "trial \(trial)")
        }
    }
}
