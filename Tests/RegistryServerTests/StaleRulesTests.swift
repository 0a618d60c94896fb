import RegistryCore
import RegistryTestSupport
import RegistryWire
import Synchronization
import Testing
@testable import RegistryServer

/// Requests prepared with vendor rules older than those in force are prepared again under the
/// lock, every one of a group, and the connection's resolver is renewed.
@Suite(.timeLimit(.minutes(5))) struct StaleRulesTests: EngineTesting {
    static func submit(
        _ engine: RegistryEngine, _ bodies: [ClientBody], resolver: BundleResolver
    ) async -> (answers: [ServerBody], resolver: BundleResolver) {
        let frames = bodies.enumerated().map { ClientFrame(requestID: UInt64($0.offset + 1), body: $0.element) }
        return await withCheckedContinuation { continuation in
            var resolver = resolver
            let meeting = Meeting(continuation)
            engine.requests.submit(frames, resolver: &resolver, access: .unrestricted) { answers in
                meeting.answered(answers.frames.map(\.body))
            }
            meeting.renewed(resolver)
        }
    }

    /// Resumes with the answers and the resolver a submit renewed, once it has both: the answers
    /// come from the commit pipeline's thread, which can deliver them before `submit` returns
    /// the resolver.
    final class Meeting: Sendable {
        private let continuation: CheckedContinuation<(answers: [ServerBody], resolver: BundleResolver), Never>
        private let parts = Mutex<(answers: [ServerBody]?, resolver: BundleResolver?)>((nil, nil))

        init(_ continuation: CheckedContinuation<(answers: [ServerBody], resolver: BundleResolver), Never>) {
            self.continuation = continuation
        }

        func answered(_ answers: [ServerBody]) {
            resumeIfComplete(parts.withLock { $0.answers = answers; return $0 })
        }

        func renewed(_ resolver: BundleResolver) {
            resumeIfComplete(parts.withLock { $0.resolver = resolver; return $0 })
        }

        private func resumeIfComplete(_ parts: (answers: [ServerBody]?, resolver: BundleResolver?)) {
            guard let answers = parts.answers, let resolver = parts.resolver else { return }
            continuation.resume(returning: (answers, resolver))
        }
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
