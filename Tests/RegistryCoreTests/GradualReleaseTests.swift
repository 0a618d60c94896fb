#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import RegistryCore

/// ``GradualRelease``: a big mapping goes back to the kernel a piece at a time, on a thread of
/// its own, and all of it in the end.
@Suite struct GradualReleaseTests {
    @Test func thePiecesCoverAMappingExactlyAndInOrder() {
        let piece = GradualRelease.pieceBytes
        #expect(GradualRelease.pieces(length: piece) == [0..<piece])
        #expect(GradualRelease.pieces(length: 2 * piece + 5) == [0..<piece, piece..<2 * piece, 2 * piece..<2 * piece + 5])
        #expect(GradualRelease.pieces(length: 10, pieceBytes: 4) == [0..<4, 4..<8, 8..<10])
        #expect(GradualRelease.pieces(length: 0).isEmpty)
    }

    #if os(Linux)
    /// Whether the page at `offset` bytes from `start` is still mapped (`mincore` refuses an
    /// unmapped page with ENOMEM).
    private func isMapped(_ start: UnsafeMutableRawPointer, page offset: Int = 0) -> Bool {
        var resident = [UInt8](repeating: 0, count: 1)
        return mincore(start + offset, 4_096, &resident) == 0
    }

    private func map(_ length: Int) -> UnsafeMutableRawPointer {
        let start = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
        precondition(start != MAP_FAILED)
        return start
    }

    @Test func aMappingOfOnePieceGoesAtOnce() {
        let length = 64 << 10
        let start = map(length)
        GradualRelease.unmap(start: UInt(bitPattern: start), length: length, pieceBytes: length, pauseMicros: 1_000_000)
        #expect(!isMapped(start))
    }

    /// Pieces go one after another, the first at once and the rest after pauses, on a thread
    /// named `index-release`; in the end nothing of the mapping is left.
    @Test func aBigMappingGoesPieceByPieceOnAThreadOfItsOwn() throws {
        let piece = 1 << 20
        let length = 4 * piece
        let start = map(length)
        GradualRelease.unmap(start: UInt(bitPattern: start), length: length, pieceBytes: piece, pauseMicros: 200_000)
        var firstGone = false
        for _ in 0..<100 where !firstGone {
            firstGone = !isMapped(start, page: 0)
            if !firstGone { usleep(2_000) }
        }
        #expect(firstGone)
        #expect(isMapped(start, page: length - 4_096), "the last piece went before its turn")
        #expect(threadNamesOfThisProcess().contains("index-release"))
        var lastGone = false
        for _ in 0..<300 where !lastGone {
            lastGone = !isMapped(start, page: length - 4_096)
            if !lastGone { usleep(10_000) }
        }
        #expect(lastGone)
        #expect((0..<4).allSatisfy { !isMapped(start, page: $0 * piece) })
    }
    #endif
}
