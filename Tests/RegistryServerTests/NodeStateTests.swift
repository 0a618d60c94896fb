import RegistryCore
import RegistryWire
import Testing
@testable import RegistryServer

@Suite struct NodeStateTests {
    func makeState(maxBatch: UInt32 = 3) throws -> NodeState {
        NodeState(
            clock: HybridLogicalClock(), nodeID: NodeID(trusted: "node-a"), epoch: 1, nextSequence: 1, rules: try VendorRules(),
            limits: Limits(maxFrameBytes: 1 << 20, maxBatchSize: maxBatch, maxInFlight: 8))
    }

    func handle(_ state: inout NodeState, _ body: ClientBody, operations: inout [LoggedOperation]) -> ServerBody {
        var generator = SplitMix64(seed: 5)
        return state.handle(ClientFrame(requestID: 1, body: body), wallMillis: 1_000, generator: &generator, operations: &operations)
    }

    @Test func registrationsAreLoggedWithConsecutiveSequenceNumbers() throws {
        var state = try makeState()
        var operations = [LoggedOperation]()
        _ = handle(&state, .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1)), operations: &operations)
        _ = handle(&state, .register(RegisterRequest(bundleID: "com.v.b", idfv: idfv1)), operations: &operations)
        _ = handle(&state, .register(RegisterRequest(bundleID: "bad", idfv: idfv1)), operations: &operations)
        #expect(operations.map(\.sequence) == [1, 2])
        #expect(operations[0].timestamp < operations[1].timestamp)
        #expect(state.nextSequence == 3)
    }

    /// Removing a member is a write: a node its peers refuse (removed itself), or whose clock ran
    /// ahead, would log a removal that never replicates, so it refuses it as it refuses
    /// registrations.
    @Test func aNodeThatRefusesWritesRefusesAMembersRemovalToo() throws {
        func code(_ body: ServerBody) -> ErrorCode? {
            if case .error(let error) = body { return error.code }
            return nil
        }
        var state = try makeState()
        var operations = [LoggedOperation]()
        state.changeMembership(NodeID(trusted: "node-b"), address: "b:1", removed: false, wallMillis: 1_000, operations: &operations)
        state.changeMembership(NodeID(trusted: "node-c"), address: "c:1", removed: false, wallMillis: 1_000, operations: &operations)
        #expect(code(handle(&state, .removeMember(nodeID: "Not A Node", force: false), operations: &operations)) == .invalidArgument)
        state.changeMembership(NodeID(trusted: "node-a"), address: "", removed: true, wallMillis: 1_000, operations: &operations)
        let logged = operations.count
        #expect(code(handle(&state, .removeMember(nodeID: "node-b", force: false), operations: &operations)) == .notAMember)
        #expect(code(handle(&state, .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1)), operations: &operations)) == .notAMember)
        #expect(operations.count == logged, "nothing logged")

        var ahead = try makeState()
        var aheadOperations = [LoggedOperation]()
        ahead.changeMembership(NodeID(trusted: "node-b"), address: "b:1", removed: false, wallMillis: 10_000_000, operations: &aheadOperations)
        var generator = SplitMix64(seed: 5)
        let body = ahead.handle(
            ClientFrame(requestID: 2, body: .removeMember(nodeID: "node-b", force: true)), wallMillis: 1_000, generator: &generator,
            operations: &aheadOperations)
        #expect(code(body) == .clockSkew)
        #expect(aheadOperations.count == 1)
    }

    /// A peer's snapshot installed in place of the state, whose members say this node was
    /// removed after as many membership changes as the old state had seen: the node refuses
    /// writes. It kept the old state's answer (cached by that count) and acknowledged writes after
    /// it knew it was removed (the cluster simulation's seed 570 of 2,000).
    @Test func aSnapshotThatSaysThisNodeWasRemovedIsBelievedOnInstall() throws {
        var state = try makeState()
        var operations = [LoggedOperation]()
        state.changeMembership(NodeID(trusted: "node-b"), address: "b:1", removed: false, wallMillis: 1_000, operations: &operations)
        // Decided once, not removed: the answer is kept for this count of membership changes.
        guard case .registerResult = handle(&state, .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1)), operations: &operations) else {
            Issue.record("a member takes writes")
            return
        }
        var installed = RegistryState()
        installed.apply(MembershipOp(node: NodeID(trusted: "node-a"), address: "", removed: true, at: HLCTimestamp(millis: 2_000, counter: 0)))
        #expect(installed.membershipChanges == state.registry.membershipChanges, "the same count, which the cache was keyed by")
        state.install(installed, holding: VersionVector(), clock: HLCTimestamp(millis: 2_000, counter: 0))
        let body = handle(&state, .register(RegisterRequest(bundleID: "com.v.a", idfv: idfv2)), operations: &operations)
        guard case .error(let error) = body else {
            Issue.record("a node whose installed state says it was removed answered \(body)")
            return
        }
        #expect(error.code == .notAMember)
    }

    @Test func aBatchOverTheLimitIsRefusedWhole() throws {
        var state = try makeState(maxBatch: 2)
        var operations = [LoggedOperation]()
        let batch = Array(repeating: RegisterRequest(bundleID: "com.v.a", idfv: idfv1), count: 3)
        let answer = handle(&state, .registerBatch(batch), operations: &operations)
        guard case .error(let error) = answer else { return #expect(Bool(false), "\(answer)") }
        #expect(error.code == .batchTooLarge)
        #expect(operations.isEmpty)
    }

    @Test func aBatchOfFirstInstallsLogsWhatTheSameRegistrationsOneAtATimeLog() throws {
        let requests = (1...2).map { index in
            RegisterRequest(bundleID: "com.v.a", idfv: "11111111-1111-4111-8111-11111111111\(index)")
        } + [RegisterRequest(bundleID: "com.v.a", keychain: "22222222-1111-4111-8111-111111111111", idfv: nil)]
        var batched = try makeState()
        var batchOperations = [LoggedOperation]()
        var generator = SplitMix64(seed: 5)
        let answer = batched.handle(
            ClientFrame(requestID: 1, body: .registerBatch(requests)), wallMillis: 1_000, generator: &generator,
            operations: &batchOperations)
        var single = try makeState()
        var singleOperations = [LoggedOperation]()
        generator = SplitMix64(seed: 5)
        var singleIDs = [String]()
        for request in requests {
            let body = single.handle(
                ClientFrame(requestID: 1, body: .register(request)), wallMillis: 1_000, generator: &generator,
                operations: &singleOperations)
            guard case .registerResult(let result) = body else { return #expect(Bool(false), "\(body)") }
            singleIDs.append(result.deviceID)
        }
        guard case .registerBatchResult(let items) = answer else { return #expect(Bool(false), "\(answer)") }
        #expect(batchOperations == singleOperations)
        #expect(items == singleIDs.map { .result(RegisterResult(deviceID: $0, created: true, vendor: "com.v")) })
        // Each new device's ID is minted from its vendor and IDFV, or without an IDFV from its
        // keychain UUID.
        for operation in batchOperations {
            guard case .registration(let op) = operation.operation else { continue }
            if let idfv = op.claims.first(where: { $0.kind == .idfv }) {
                #expect(op.device.id == DeviceID.minted(vendor: op.device.vendor, idfv: idfv.value, key: MintingKey(secret: "")))
            } else {
                let keychain = try #require(op.claims.first { $0.kind == .keychain })
                #expect(op.device.id == DeviceID.minted(vendor: op.device.vendor, keychain: keychain.value, key: MintingKey(secret: "")))
            }
        }
    }

    @Test func aBatchAnswersEachItemInOrder() throws {
        var state = try makeState()
        var operations = [LoggedOperation]()
        let answer = handle(
            &state,
            .registerBatch([
                RegisterRequest(bundleID: "com.v.a", idfv: idfv1), RegisterRequest(bundleID: "com..a", idfv: idfv1),
                RegisterRequest(bundleID: "com.v.b", idfv: idfv1),
            ]), operations: &operations)
        guard case .registerBatchResult(let items) = answer, items.count == 3 else { return #expect(Bool(false), "\(answer)") }
        guard case .result(let first) = items[0], case .error(let bad) = items[1], case .result(let third) = items[2] else {
            return #expect(Bool(false), "\(items)")
        }
        #expect(first.created && !third.created && first.deviceID == third.deviceID)
        #expect(bad.code == .invalidBundleID)
    }

    @Test func resolveAndLookupAnswerTypedErrors() throws {
        var state = try makeState()
        var operations = [LoggedOperation]()
        func code(_ body: ClientBody) -> ErrorCode? {
            if case .error(let error) = handle(&state, body, operations: &operations) { return error.code }
            return nil
        }
        #expect(code(.resolve(deviceID: "nope")) == .invalidDeviceID)
        #expect(code(.resolve(deviceID: "00000000-0000-4000-8000-000000000001")) == .notFound)
        let idfv = PresentedIdentifier(rawKind: 2, text: idfv1)
        #expect(code(.lookup(LookupRequest(scope: .unspecified, identifier: idfv))) == .invalidArgument)
        #expect(code(.lookup(LookupRequest(scope: .bundle("com.v.a"), identifier: nil))) == .missingIdentifier)
        #expect(code(.lookup(LookupRequest(scope: .bundle("com.v.a"), identifier: idfv))) == .notFound)
        #expect(code(.lookup(LookupRequest(scope: .vendor("x"), identifier: idfv))) == .invalidArgument)
        #expect(code(.lookup(LookupRequest(scope: .bundle("com.v.a"), identifier: PresentedIdentifier(rawKind: 2, text: "z")))) == .invalidIdentifier)
        #expect(code(.unknown) == .unknownMessage)
        #expect(code(.register(RegisterRequest(bundleID: "com.v.a", identifiers: []))) == .missingIdentifier)
        #expect(operations.isEmpty)
    }
}

let idfv1 = "11111111-1111-4111-8111-111111111111"
let idfv2 = "22222222-2222-4222-8222-222222222222"
let key1 = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
