import NIOCore
import RegistryCore
import RegistryWire

/// The wire form of the feed's most recent events, each packed once however many watchers send
/// it: a ring of `capacity` slots, slot `position % capacity` holding the event at `position`
/// while no newer one took the slot. A watcher that lags further packs its events again.
struct PackedEvents {
    private var slots: [(position: UInt64, bytes: ByteBuffer)?]

    init(capacity: Int = 1 << 16) {
        slots = Array(repeating: nil, count: capacity)
    }

    /// The packed event at `position`, packing `entry` when no slot holds it.
    mutating func packed(_ entry: FeedEntry, at position: UInt64) throws(CodecError) -> ByteBuffer {
        let slot = Int(position % UInt64(slots.count))
        if let held = slots[slot], held.position == position { return held.bytes }
        let bytes = try WatchFrames.packed(WatchEventMessage(entry))
        slots[slot] = (position, bytes)
        return bytes
    }
}
