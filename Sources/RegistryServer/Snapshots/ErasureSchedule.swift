import RegistryCore

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
/// An operation that names a device already gone puts its bytes in the journal too (a bind from
/// a node cut off when the forget was made, say), though the state drops it: it counts as a
/// forget here (``RegistryState/erasures``).
///
/// Forgets are gathered in groups: one group holds the forgets seen within a quarter of the
/// deadline of its first, so that a steady stream of forgets costs one erasure snapshot per
/// quarter, not one per forget. A group's snapshot is due half the deadline after its first
/// forget, leaving the other half for the snapshot itself, and once what the node held when it
/// saw the group's last forget is durable: a snapshot covers only what is durable, and covers a
/// group only when it covers that.
struct ErasureSchedule: Sendable, Equatable {
    /// The deadline; 0 turns the schedule off.
    let withinNanos: UInt64

    /// Forgets seen and not yet covered by an erasure snapshot: when the first of them was seen,
    /// and what the node held (every log's sequence) when it saw the last.
    struct Group: Sendable, Equatable {
        var first: UInt64
        var held: [LogID: UInt64]
    }

    private(set) var groups: [Group] = []
    /// The state's ``RegistryState/erasures`` when last looked at.
    private(set) var erasuresSeen = 0

    init(withinSeconds: Int) {
        withinNanos = UInt64(withinSeconds) * 1_000_000_000
    }

    /// The state's ``RegistryState/erasures`` is now `erasures`, and it holds `held` of every
    /// log: those beyond the last count are new forgets, seen at `nowNanos`.
    mutating func observe(erasures: Int, held: [LogID: UInt64], nowNanos: UInt64) {
        defer { erasuresSeen = erasures }
        guard withinNanos > 0, erasures > erasuresSeen else { return }
        if let last = groups.last, nowNanos &- last.first < withinNanos / 4 {
            groups[groups.count - 1].held = held
        } else {
            groups.append(Group(first: nowNanos, held: held))
        }
    }

    /// Whether an erasure snapshot should start now, `durable` of every log being durable.
    func isDue(nowNanos: UInt64, durable: [LogID: UInt64]) -> Bool {
        groups.contains { nowNanos >= $0.first &+ withinNanos / 2 && Self.covers(durable, $0.held) }
    }

    /// An erasure snapshot of `covered` (every log's sequence) was taken: the groups it covers are
    /// done.
    mutating func erasureSnapshotTaken(covering covered: [LogID: UInt64]) {
        groups.removeAll { Self.covers(covered, $0.held) }
    }

    private static func covers(_ vector: [LogID: UInt64], _ held: [LogID: UInt64]) -> Bool {
        held.allSatisfy { log, sequence in (vector[log] ?? 0) >= sequence }
    }

    /// The interval at which a node checks the schedule: a twentieth of the deadline, from 0.1 s
    /// to a minute.
    var checkIntervalNanos: UInt64 {
        min(max(withinNanos / 20, 100_000_000), 60_000_000_000)
    }
}
