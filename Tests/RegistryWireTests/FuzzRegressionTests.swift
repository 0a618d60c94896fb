import Foundation
import NIOCore
import RegistryCore
import RegistryFuzzing
import RegistryWire
import Testing

/// Inputs the fuzzers once crashed on (`Fuzz/Regressions/<target>/`), replayed through the same
/// bodies the fuzz targets run, and the bugs they found, checked directly.
@Suite struct FuzzRegressionTests {
    static let regressions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Regressions")

    @Test func everyInputThatOnceCrashedRunsCleanly() throws {
        let bodies: [String: (UnsafeRawBufferPointer) -> Void] = [
            "FrameDecoder": FuzzBodies.frameDecoder, "ClientFrames": FuzzBodies.clientFrames, "PeerFrames": FuzzBodies.peerFrames,
            "Snapshot": FuzzBodies.snapshot,
        ]
        var replayed = 0
        for (target, body) in bodies {
            let directory = Self.regressions.appendingPathComponent(target).path
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                let bytes = try #require(FileManager.default.contents(atPath: directory + "/" + name))
                bytes.withUnsafeBytes { body($0) }
                replayed += 1
            }
        }
        #expect(replayed >= 1)
    }

    /// The first find: an identifier that is not UUID text and holds a NUL was cut short by the
    /// encoder, so the node received another identifier than the caller gave.
    @Test func anIdentifierHoldingANULIsRefusedByTheEncoder() {
        let frame = ClientFrame(
            requestID: 1, body: .register(RegisterRequest(bundleID: "com.v.a", identifiers: [PresentedIdentifier(rawKind: 1, text: "1111-f\0\0junk")])))
        var buffer = ByteBuffer()
        #expect(throws: CodecError.self) { try frame.encode(into: &buffer) }
    }
}
