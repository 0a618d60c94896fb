import Platform

/// Gives a big mapping back to the kernel a piece at a time, on a thread of its own
/// (`index-release`), instead of all at once on whatever thread dropped it.
///
/// Why: an index that grew frees its old table once every entry has moved, gigabytes at once.
/// On a virtual machine that reports free memory to its hypervisor (free page reporting), the
/// reports that followed stalled a busy node for tens of milliseconds at a time for as long as
/// they lasted (docs/architecture.md, "Memory", has the figures). A node sized with
/// `--expected-devices` frees no table. The price is memory held longer: about a minute per
/// gigabyte. The stall was seen on one virtual machine, and no ordinary server has been measured,
/// so it is a setting (`--release-tables-gradually`), off by default.
enum GradualRelease {
    /// Bytes unmapped at a time.
    static let pieceBytes = 16 << 20
    /// The pause after each piece.
    static let pauseMicros: UInt32 = 1_000_000

    /// The pieces of a mapping of `length` bytes, in order: at most `pieceBytes` each, covering
    /// it exactly.
    static func pieces(length: Int, pieceBytes: Int = pieceBytes) -> [Range<Int>] {
        stride(from: 0, to: length, by: pieceBytes).map { $0..<min($0 + pieceBytes, length) }
    }

    /// Unmaps the `length` bytes at `start`: at once when they fit in one piece (or no thread
    /// can be started), otherwise piece by piece on a new thread, with `pauseMicros` after each.
    static func unmap(start: UInt, length: Int, pieceBytes: Int = pieceBytes, pauseMicros: UInt32 = pauseMicros) {
        release(length: length, pieceBytes: pieceBytes, pauseMicros: pauseMicros) { piece in
            _ = munmap(UnsafeMutableRawPointer(bitPattern: start + UInt(piece.lowerBound)), piece.count)
        }
    }

    /// Hands `releasePiece` the pieces of `length` bytes: all of them in one call on this thread
    /// when they fit in one piece (or no thread can be started), otherwise one at a time, in
    /// order, on a new thread named `index-release`, with `pauseMicros` after each but the last.
    static func release(
        length: Int, pieceBytes: Int = pieceBytes, pauseMicros: UInt32 = pauseMicros,
        _ releasePiece: @escaping @Sendable (Range<Int>) -> Void
    ) {
        guard length > pieceBytes else { return releasePiece(0..<length) }
        let started = DetachedThread.start(named: "index-release") {
            for piece in pieces(length: length, pieceBytes: pieceBytes) {
                releasePiece(piece)
                if piece.upperBound < length { usleep(pauseMicros) }
            }
        }
        if !started { releasePiece(0..<length) }
    }
}
