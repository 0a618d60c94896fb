import Platform
import Synchronization
import Testing
@testable import RegistryServer

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
    /// What ``GradualRelease/release(length:pieceBytes:pauseMicros:_:)`` handed over: each
    /// piece, the thread that got it, when, and what the real `munmap` of it returned.
    ///
    /// The tests look at these records rather than at the address space afterwards: tests run in
    /// parallel, and another test's `mmap` may take an address range the moment it is given back,
    /// so "no longer mapped" is not something this process can observe reliably.
    private final class Releases: Sendable {
        struct Piece: Equatable {
            var range: Range<Int>
            var thread: String
            var millis: Int
            var result: Int32
        }
        private let pieces = Mutex<[Piece]>([])
        private let startAddress: UInt

        init(mapping length: Int) {
            let start = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            precondition(start != MAP_FAILED)
            startAddress = UInt(bitPattern: start)
        }

        /// Unmaps `range` of the mapping for real and records it.
        func release(_ range: Range<Int>) {
            let result = munmap(UnsafeMutableRawPointer(bitPattern: startAddress + UInt(range.lowerBound)), range.count)
            let piece = Piece(range: range, thread: nameOfThisThread(), millis: Self.nowMillis(), result: result)
            pieces.withLock { $0.append(piece) }
        }

        var recorded: [Piece] { pieces.withLock { $0 } }

        /// Waits up to `seconds` for `count` pieces.
        func wait(for count: Int, seconds: Int) -> [Piece] {
            for _ in 0..<seconds * 100 where recorded.count < count { usleep(10_000) }
            return recorded
        }

        static func nowMillis() -> Int {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return now.tv_sec * 1_000 + now.tv_nsec / 1_000_000
        }
    }

    @Test func aMappingOfOnePieceGoesAtOnceOnTheCallersThread() {
        let length = 64 << 10
        let releases = Releases(mapping: length)
        GradualRelease.release(length: length, pieceBytes: length, pauseMicros: 1_000_000) { releases.release($0) }
        let pieces = releases.recorded
        #expect(pieces.map(\.range) == [0..<length])
        #expect(pieces.map(\.thread) == [nameOfThisThread()])
        #expect(pieces.map(\.result) == [0])
    }

    /// Pieces go one after another, in order, on a thread named `index-release`, with at least
    /// the pause between them; in the end all of the mapping is unmapped.
    @Test func aBigMappingGoesPieceByPieceOnAThreadOfItsOwn() {
        let piece = 1 << 20
        let length = 4 * piece
        let pauseMicros: UInt32 = 50_000
        let releases = Releases(mapping: length)
        GradualRelease.release(length: length, pieceBytes: piece, pauseMicros: pauseMicros) { releases.release($0) }
        let pieces = releases.wait(for: 4, seconds: 30)
        #expect(pieces.map(\.range) == [0..<piece, piece..<2 * piece, 2 * piece..<3 * piece, 3 * piece..<length])
        #expect(pieces.allSatisfy { $0.thread == "index-release" }, "\(pieces.map(\.thread))")
        #expect(pieces.allSatisfy { $0.result == 0 })
        let gaps = zip(pieces, pieces.dropFirst()).map { $1.millis - $0.millis }
        #expect(gaps.allSatisfy { $0 >= Int(pauseMicros) / 1_000 - 1 }, "gaps \(gaps) ms")
    }

    #endif
}
