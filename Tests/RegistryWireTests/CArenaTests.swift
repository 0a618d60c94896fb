import NIOCore
import RegistryCore
import Testing
@testable import RegistryWire

@Suite struct CArenaTests {
    /// Seeded sizes from 1 byte to past the largest block: every allocation is 16-aligned, none
    /// overlaps another, and what was written into each is still there after all the others.
    @Test func allocationsAcrossGrowingBlocksStayAlignedAndIntact() {
        let arena = CArena()
        var random = SplitMix64(seed: 17)
        var sizes = (0..<600).map { _ in Int(random.next() % 700) + 1 }
        sizes.insert(CArena.largestBlockSize + 1, at: 300)
        var regions = [(UnsafeMutableRawPointer, Int)]()
        for (index, size) in sizes.enumerated() {
            let pointer = arena.allocate(bytes: size)
            #expect(UInt(bitPattern: pointer) % 16 == 0)
            pointer.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: index), count: size)
            regions.append((pointer, size))
        }
        for (index, (pointer, size)) in regions.enumerated() {
            let bytes = UnsafeRawBufferPointer(start: pointer, count: size)
            #expect(bytes.allSatisfy { $0 == UInt8(truncatingIfNeeded: index) })
        }
        let sorted = regions.map { (UInt(bitPattern: $0.0), $0.1) }.sorted { $0.0 < $1.0 }
        #expect(zip(sorted, sorted.dropFirst()).allSatisfy { $0.0 + UInt($0.1) <= $1.0 })
    }

    /// A batch big enough to span several blocks survives the round trip through protobuf-c,
    /// whose unpacking allocates every field from the arena.
    @Test func aLargeBatchRoundTrips() throws {
        var random = SplitMix64(seed: 5)
        let requests = (0..<1_000).map { index in
            RegisterRequest(
                bundleID: "com.vendor\(index % 7).app\(index % 3)",
                identifiers: [
                    PresentedIdentifier(rawKind: IdentifierKind.keychain.rawValue, value: UUIDText(uuid: UUID128(high: random.next(), low: random.next()))),
                    PresentedIdentifier(rawKind: IdentifierKind.idfv.rawValue, text: UUID128(high: random.next(), low: random.next()).text.uppercased()),
                ])
        }
        let frame = ClientFrame(requestID: 9, body: .registerBatch(requests))
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        #expect(try ClientFrame(decoding: buffer) == frame)
    }
}
