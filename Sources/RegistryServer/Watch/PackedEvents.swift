import NIOCore
import RegistryCore
import RegistryWire

/// The wire form of the feed's most recent events, each packed once however many watchers send
/// it, as the field a `WatchEvents` message holds it in (``WatchFrames/appendEventField(_:to:)``).
///
/// A ring of `capacity` slots: slot `position % capacity` says where the event at `position` is
/// while no newer one took the slot. The events packed by one call lie one after the other in one
/// buffer (a chunk), so a watcher sends a run of them as one slice of it and copies nothing. A
/// chunk is freed once no slot points into it. A watcher that lags further packs its events again.
struct PackedEvents {
    /// Where one event's field lies. `length` 0: the codec refused the event (text with a NUL,
    /// which no state holds), and it is left out of every frame.
    private struct Slot {
        var position: UInt64
        var chunk: UInt64
        var offset: UInt32
        var length: UInt32

        static let empty = Slot(position: .max, chunk: 0, offset: 0, length: 0)
    }

    private var slots: [Slot]
    /// The chunks slots point into, each with how many do.
    private var chunks: [UInt64: (bytes: ByteBuffer, slots: Int)] = [:]
    private var nextChunk: UInt64 = 0

    init(capacity: Int = 1 << 16) {
        slots = Array(repeating: .empty, count: capacity)
    }

    /// The fields of the events at `positions` of `feed` (which holds them), in order, as runs
    /// of consecutive fields, and the runs' size in all. Packs the events no slot holds.
    mutating func runs(at positions: [UInt64], of feed: ChangeFeed) -> (runs: [ByteBuffer], bytes: Int) {
        packMissing(positions, of: feed)
        var runs = [ByteBuffer]()
        var bytes = 0
        var run: (chunk: UInt64, start: UInt32, end: UInt32)?
        func close(_ run: (chunk: UInt64, start: UInt32, end: UInt32)) {
            let chunk = chunks[run.chunk]!.bytes
            runs.append(chunk.getSlice(at: chunk.readerIndex + Int(run.start), length: Int(run.end - run.start))!)
            bytes += Int(run.end - run.start)
        }
        for position in positions {
            let slot = slots[index(position)]
            guard slot.position == position else {
                // A read that spans more than the ring overwrote its own slot: this one event is
                // packed alone.
                if let run { close(run) }
                run = nil
                var alone = ByteBuffer()
                if (try? WatchFrames.appendEventField(WatchEventMessage(feed[position]), to: &alone)) != nil {
                    bytes += alone.readableBytes
                    runs.append(alone)
                }
                continue
            }
            if slot.length == 0 { continue }
            if let open = run, open.chunk == slot.chunk, open.end == slot.offset {
                run = (open.chunk, open.start, slot.offset + slot.length)
            } else {
                if let run { close(run) }
                run = (slot.chunk, slot.offset, slot.offset + slot.length)
            }
        }
        if let run { close(run) }
        return (runs, bytes)
    }

    /// Forgets the packed events at `positions` (the feed erased them, ``ChangeFeed``): their
    /// bytes are overwritten with zeros, and their slots emptied. A chunk that a frame being sent
    /// still shares is copied by the overwrite, and the old bytes go when that send ends. An event
    /// whose slot a newer one took is not found: its bytes go with its chunk, once no slot
    /// points into it.
    mutating func erase(_ positions: [UInt64]) {
        for position in positions {
            let slot = slots[index(position)]
            guard slot.position == position else { continue }
            if slot.length > 0 {
                let at = chunks[slot.chunk]!.bytes.readerIndex + Int(slot.offset)
                chunks[slot.chunk]!.bytes.setRepeatingByte(0, count: Int(slot.length), at: at)
            }
            release(slot)
            slots[index(position)] = .empty
        }
    }

    /// Whether the event at `position` is packed (for tests).
    func holds(_ position: UInt64) -> Bool { slots[index(position)].position == position }

    /// The chunks' bytes (for tests).
    var chunkBytes: [ByteBuffer] { chunks.values.map(\.bytes) }

    /// Chunks held: at most one per slot.
    var chunksHeld: Int { chunks.count }

    /// Packs the events at `positions` that no slot holds into one new chunk.
    private mutating func packMissing(_ positions: [UInt64], of feed: ChangeFeed) {
        var packed = [(position: UInt64, offset: UInt32, length: UInt32)]()
        var buffer = ByteBuffer()
        for position in positions where slots[index(position)].position != position {
            let offset = buffer.writerIndex
            let refused = (try? WatchFrames.appendEventField(WatchEventMessage(feed[position]), to: &buffer)) == nil
            packed.append((position, UInt32(offset), refused ? 0 : UInt32(buffer.writerIndex - offset)))
        }
        guard !packed.isEmpty else { return }
        let chunk = nextChunk
        nextChunk += 1
        chunks[chunk] = (buffer, packed.count)
        for event in packed {
            let at = index(event.position)
            release(slots[at])
            slots[at] = Slot(position: event.position, chunk: chunk, offset: event.offset, length: event.length)
        }
    }

    /// A slot is overwritten: its chunk is freed when no other slot points into it.
    private mutating func release(_ slot: Slot) {
        guard slot.position != Slot.empty.position else { return }
        chunks[slot.chunk]!.slots -= 1
        if chunks[slot.chunk]!.slots == 0 { chunks[slot.chunk] = nil }
    }

    private func index(_ position: UInt64) -> Int { Int(position % UInt64(slots.count)) }
}
