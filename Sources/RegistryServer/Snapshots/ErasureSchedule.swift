/// When a node takes the snapshots that take forgotten devices' bytes off its disk in time
/// (`--erasure-within`), as a plain value.
///
/// A forget removes the device's records from the state at once, but their bytes stay in the
/// snapshots kept (``Snapshotter/keeping``) and in the journal files those cover. An *erasure
/// snapshot* takes them off: the journal first goes on in a new file, then a snapshot is taken
/// that is kept alone (the older ones, which may hold the records, are deleted), so that every
/// journal file before it can be trimmed once every member holds it (the retention floor).
/// Ordinary snapshots keep an older one beside them, so they do not count.
///
/// Forgets are gathered in groups: one group holds the forgets seen within a quarter of the
/// deadline of its first, so that a steady stream of forgets costs one erasure snapshot per
/// quarter, not one per forget. A group's snapshot is due half the deadline after its first
/// forget, leaving the other half for the snapshot itself. A forget counts as covered by a
/// snapshot that started at least ``settleNanos`` after it was seen: by then it is durable.
struct ErasureSchedule: Sendable, Equatable {
    /// The deadline; 0 turns the schedule off.
    let withinNanos: UInt64
    /// Forgets seen before a snapshot's start by less than this are not counted as covered by it.
    static let settleNanos: UInt64 = 1_000_000_000

    /// Forgets seen and not yet covered by an erasure snapshot: when the first and the last of
    /// them were seen.
    struct Group: Sendable, Equatable {
        var first: UInt64, last: UInt64
    }

    private(set) var groups: [Group] = []
    /// Tombstones the state held when last looked at.
    private(set) var tombstonesSeen = 0

    init(withinSeconds: Int) {
        withinNanos = UInt64(withinSeconds) * 1_000_000_000
    }

    /// The state now holds `tombstones` tombstones: those beyond the last count are new forgets,
    /// seen at `nowNanos`.
    mutating func observe(tombstones: Int, nowNanos: UInt64) {
        defer { tombstonesSeen = tombstones }
        guard withinNanos > 0, tombstones > tombstonesSeen else { return }
        if let last = groups.last, nowNanos &- last.first < withinNanos / 4 {
            groups[groups.count - 1].last = nowNanos
        } else {
            groups.append(Group(first: nowNanos, last: nowNanos))
        }
    }

    /// Whether an erasure snapshot should start now.
    func isDue(nowNanos: UInt64) -> Bool {
        groups.contains { nowNanos >= max($0.first &+ withinNanos / 2, $0.last &+ Self.settleNanos) }
    }

    /// An erasure snapshot that started at `startedNanos` was taken: the groups seen long enough
    /// before it are done.
    mutating func erasureSnapshotTaken(startedNanos: UInt64) {
        groups.removeAll { $0.last &+ Self.settleNanos <= startedNanos }
    }

    /// The interval at which a node checks the schedule: a twentieth of the deadline, from 0.1 s
    /// to a minute.
    var checkIntervalNanos: UInt64 {
        min(max(withinNanos / 20, 100_000_000), 60_000_000_000)
    }
}
