import Foundation
import RegistryClient
import RegistryCore
import RegistryWire
import Testing

/// Before the first unlock iOS gives no IDFV: sibling apps that present only the shared
/// keychain UUID, through two nodes at the same moment, must get one ID at once.
@Suite(.serialized, .timeLimit(.minutes(5))) struct KeychainRaceTests {
    @Test func keychainOnlySiblingsRacedThroughTwoNodesGetOneID() async throws {
        let cluster = try ClusterTests.Cluster()
        defer { cluster.stop() }
        let atA = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[0].endpoint), clientName: "race")
        let atB = try await RegistryClient.connect(to: Endpoint(parsing: cluster.nodes[1].endpoint), clientName: "race")
        var split = 0
        let pairs = 100
        for index in 0..<pairs {
            let keychain = UUID128(high: 0x6B63 << 32 | UInt64(index), low: 3).text
            func request(_ app: Int) -> RegisterRequest {
                RegisterRequest(bundleID: "com.keychain.app\(app)", identifiers: [PresentedIdentifier(rawKind: 1, text: keychain)])
            }
            async let first = atA.register(request(1))
            async let second = atB.register(request(2))
            let (one, two) = try await (first, second)
            if one.deviceID != two.deviceID { split += 1 }
        }
        await atA.close()
        await atB.close()
        print("keychain-only sibling races through two nodes: \(pairs) pairs, \(split) told two IDs")
        #expect(split == 0)
        let stats = try await cluster.converged(within: 30)
        #expect(stats.allSatisfy { $0.deviceCount == UInt64(pairs) && $0.aliasCount == 0 }, "\(stats.map { ($0.deviceCount, $0.aliasCount) })")
    }
}
