import Foundation
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// A node that refuses writes (removed from the cluster, or its clock ahead) refuses a vendor
/// rule change with that reason, as it refuses any write, and not with the catch-up's
/// `UNAVAILABLE` (``CatchUpBarrier``): no catch-up would let it take the change, and the
/// operator is told what to do instead.
@Suite(.timeLimit(.minutes(5))) struct VendorChangeWriteRefusalTests: EngineTesting {
    /// A wall clock the test sets.
    final class Wall: Sendable {
        let millis: Mutex<UInt64>
        init(_ millis: UInt64) { self.millis = Mutex(millis) }
    }

    /// An engine on `path` whose wall clock reads `wall`, with node-b a member too, so that a
    /// vendor change on it would wait for node-b.
    func openWithAPeer(_ path: String, wall: Wall) throws -> RegistryEngine {
        var configuration = NodeConfiguration()
        configuration.clusterSecret = "test cluster secret"
        configuration.dataDirectory = path
        configuration.nodeID = try NodeID("node-a")
        let engine = try RegistryEngine(configuration: configuration, logger: .quiet(), wallClock: { wall.millis.withLock { $0 } })
        engine.core.withLockedValue { core in
            core.commits.recordOperations { operations in
                core.node.changeMembership(NodeID(trusted: "node-b"), address: "b:7400", removed: false, wallMillis: core.node.clock.last.millis, operations: &operations)
            }
        }
        return engine
    }

    func vendorChange(_ engine: RegistryEngine) async -> WireError? {
        let rule = VendorRuleMessage(name: "acme", prefixes: ["com.acme"], maxDevices: 1)
        guard case .error(let error) = await submit(engine, [.vendor(.add(rule))])[0] else { return nil }
        return error
    }

    @Test func aRemovedNodeRefusesAVendorChangeAsNotAMember() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try openWithAPeer(temp.path, wall: Wall(1_000_000))
        defer { engine.close() }
        await withCheckedContinuation { done in engine.membership.learnedRemoval { done.resume() } }
        let error = await vendorChange(engine)
        #expect(error?.code == .notAMember && error?.message.contains("node-b") == true, "\(String(describing: error))")
    }

    @Test func aNodeWhoseClockRanAheadRefusesAVendorChangeAsClockSkew() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let wall = Wall(10_000_000)
        let engine = try openWithAPeer(temp.path, wall: wall)
        defer { engine.close() }
        // The clock took the future wall's time; the wall is set right afterwards.
        _ = await submit(engine, [.register(RegisterRequest(bundleID: "com.v.a", idfv: idfv1))])
        wall.millis.withLock { $0 = 1_000_000 }
        let error = await vendorChange(engine)
        #expect(error?.code == .clockSkew, "\(String(describing: error))")
    }
}
