/// Where a ``ChangeFeed``'s account events (bound, unbound) are, by account ID whatever the
/// vendor (a vendor move files an account under the joined vendor's name, and its earlier events
/// name the old one): what a forget looks up to erase, so that it reads the events of the
/// accounts it states again and no others (a feed may hold a million events, and a forget is
/// applied on the commit path).
///
/// Positions the feed dropped stay until the index holds twice as many as after its last
/// clean-up, which then drops them: each position is added once and dropped once.
struct AccountEventIndex: Sendable {
    private var positions: [UUID128: [UInt64]] = [:]
    /// Positions held, dropped ones included.
    private var count = 0
    /// ``count``, for tests.
    var heldCount: Int { count }
    /// ``count`` after the last clean-up, at least 1,024.
    private var base = 1_024

    /// Notes that the event at `position`, the newest so far, is an event of `account`.
    mutating func add(_ account: AccountKey, at position: UInt64) {
        positions[account.account, default: []].append(position)
        count += 1
    }

    /// The positions of the events of `account`'s ID, under any vendor, from `first` up to (not
    /// including) `end`, oldest first.
    func positions(of account: AccountKey, from first: UInt64, before end: UInt64) -> [UInt64] {
        (positions[account.account] ?? []).filter { $0 >= first && $0 < end }
    }

    /// Drops the positions below `first` (the feed's oldest event) once they may outnumber the
    /// others.
    mutating func dropBelow(_ first: UInt64) {
        guard count >= 2 * base else { return }
        positions = positions.compactMapValues { held in
            let kept = held.drop { $0 < first }
            return kept.isEmpty ? nil : Array(kept)
        }
        count = positions.values.reduce(0) { $0 + $1.count }
        base = max(count, 1_024)
    }

    mutating func removeAll() {
        positions = [:]
        count = 0
        base = 1_024
    }
}
