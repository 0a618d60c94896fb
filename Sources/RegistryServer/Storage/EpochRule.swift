/// How a start names its log's epoch: never the name of a log this node, or any copy of its
/// data directory, wrote before. A pure rule; the caller gives the wall clock and the entropy.
///
/// An epoch is a time part (34 bits: seconds since the Unix epoch, or one past the stored
/// epoch's when the clock reads earlier) and 30 random bits. The time part alone would be
/// reused when a directory goes back in time (a restored backup, a rolled-back disk) while the
/// clock also reads earlier than the epochs written since (a clock that ran ahead and was set
/// right): the start after the copy is taken and the start after it is put back would both be
/// "one past the stored epoch". The random bits tell those two apart, but for one chance in 2^30.
/// Epochs keep growing with the clock, so the newest log of a node sorts last.
enum EpochRule {
    static let entropyBits = 30

    /// The epoch of a start that found `stored` (nil: an empty directory) at `wallMillis`.
    static func next(after stored: UInt64?, wallMillis: UInt64, entropy: UInt64) -> UInt64 {
        let seconds = wallMillis / 1_000
        let past = stored.map { ($0 >> UInt64(entropyBits)) + 1 } ?? 0
        let time = max(seconds, past, 1) & ((1 << UInt64(64 - entropyBits)) - 1)
        return time << UInt64(entropyBits) | (entropy & ((1 << UInt64(entropyBits)) - 1))
    }

    /// The time part of `epoch`, in seconds.
    static func seconds(of epoch: UInt64) -> UInt64 {
        epoch >> UInt64(entropyBits)
    }
}
