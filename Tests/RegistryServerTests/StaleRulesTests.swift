import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// Requests prepared with vendor rules older than those in force are prepared again under the
/// lock, every one of a group, and the connection's resolver is renewed.
@Suite(.timeLimit(.minutes(3))) struct StaleRulesTests: EngineTesting {
    static func submit(
        _ engine: RegistryEngine, _ bodies: [ClientBody], resolver: BundleResolver
    ) async -> (answers: [ServerBody], resolver: BundleResolver) {
        let frames = bodies.enumerated().map { ClientFrame(requestID: UInt64($0.offset + 1), body: $0.element) }
        return await withCheckedContinuation { continuation in
            var resolver = resolver
            let holder = ResolverHolder()
            engine.requests.submit(frames, resolver: &resolver, access: .unrestricted) { answers in
                continuation.resume(returning: (answers.frames.map(\.body), holder.resolver!))
            }
            holder.resolver = resolver
        }
    }

    /// Carries the resolver a submit renewed to its delivery (set before the answers go, which
    /// wait for the commit).
    final class ResolverHolder: @unchecked Sendable {
        // Written once, by the submitting thread, before the commit that delivers; read after.
        var resolver: BundleResolver?
    }

    @Test func everyRequestOfAGroupPreparedWithOlderRulesIsFiledByTheRulesInForce() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path)
        defer { engine.close() }
        let old = engine.requests.resolver(capacity: 16)
        let added = await submit(engine, [.vendor(.add(VendorRuleMessage(name: "acme", prefixes: ["com.acme", "net.acmecdn"])))])
        guard case .vendorRules = added.first else { Issue.record("\(added)"); return }
        let idfv = "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b91"
        let (answers, renewed) = await Self.submit(
            engine,
            [
                .register(RegisterRequest(bundleID: "com.acme.mail", idfv: idfv)),
                .register(RegisterRequest(bundleID: "net.acmecdn.player", idfv: idfv)),
                .registerBatch([RegisterRequest(bundleID: "net.acmecdn.tv", idfv: idfv)]),
            ], resolver: old)
        let vendors = answers.compactMap { answer -> String? in
            switch answer {
            case .registerResult(let result): return result.vendor
            case .registerBatchResult(let items):
                if case .result(let result) = items.first { return result.vendor }
                return nil
            default: return nil
            }
        }
        #expect(vendors == ["acme", "acme", "acme"], "\(answers)")
        let bundle = try BundleID(parsing: "com.acme.x")
        #expect(renewed.version != old.version && renewed.rules.vendor(of: bundle).name == "acme")
    }
}
