import NIOCore
import RegistryCore
import RegistryWire
import Testing

@testable import RegistryServer

/// The packed events watchers share: whatever was packed before, by whichever readers, the runs
/// given for a read are the fields of its events, in order, packed one by one.
@Suite struct PackedEventsTests {
    let logs = [LogID(origin: NodeID(trusted: "node-a"), epoch: 1), LogID(origin: NodeID(trusted: "node-b"), epoch: 2)]

    /// The oracle: each event packed on its own, one after the other, refused ones left out.
    func fieldsOneByOne(_ entries: [FeedEntry]) -> ByteBuffer {
        var expected = ByteBuffer()
        for entry in entries { try? WatchFrames.appendEventField(WatchEventMessage(entry), to: &expected) }
        return expected
    }

    @Test(arguments: [1, 2, 3, 4]) func runsAreTheEventsFieldsWhateverWasPackedBefore(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var feed = ChangeFeed(capacity: 400, holding: VersionVector())
        // A small ring, so that slots are taken over while readers lag.
        var packed = PackedEvents(capacity: 32)
        var sequences = [UInt64](repeating: 0, count: logs.count)
        var readers: [(reader: FeedReader, filter: FeedFilter)] = []
        for step in 0..<300 {
            // A commit of 0 to 9 events, of two vendors; now and then one the codec refuses.
            var batch = [FeedEntry]()
            for _ in 0..<random.next() % 10 {
                let log = Int(random.next() % 2)
                sequences[log] += 1
                let vendor = random.next() % 50 == 0 ? "com.bad\u{0}" : (random.next() % 2 == 0 ? "com.x" : "com.y")
                batch.append(
                    FeedEntry(
                        log: logs[log], sequence: sequences[log], time: HLCTimestamp(rawValue: UInt64(step) << 16),
                        event: .created(device: DeviceID(UUID128(high: random.next(), low: random.next())), vendor: Vendor(trusted: vendor))))
            }
            var vector = VersionVector()
            for (log, sequence) in zip(logs, sequences) where sequence > 0 { vector.raise(to: sequence, in: log) }
            feed.publish(batch, through: vector)
            if readers.count < 4, random.next() % 20 == 0 {
                let filter = [FeedFilter.everything, FeedFilter(vendors: ["com.x"]), FeedFilter(kinds: [.merged])][Int(random.next() % 3)]
                readers.append((try! FeedReader(feed: feed, after: nil, filter: filter), filter))
            }
            for index in readers.indices where random.next() % 3 != 0 {
                guard let scan = try? readers[index].reader.scan(feed, limit: Int(random.next() % 40) + 1) else {
                    readers[index].reader = try! FeedReader(feed: feed, after: nil, filter: readers[index].filter)
                    continue
                }
                let (runs, bytes) = packed.runs(at: scan.positions, of: feed)
                var joined = ByteBuffer()
                for run in runs { joined.writeImmutableBuffer(run) }
                #expect(joined == fieldsOneByOne(scan.positions.map { feed[$0] }), "seed \(seed), step \(step)")
                #expect(bytes == joined.readableBytes)
            }
            #expect(packed.chunksHeld <= 32)
        }
    }

    @Test func eventsPackedTogetherGoOutAsOneRun() {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        let entries = (1...5).map { sequence in
            FeedEntry(
                log: logs[0], sequence: UInt64(sequence), time: HLCTimestamp(rawValue: 1),
                event: .created(device: DeviceID(UUID128(high: 1, low: UInt64(sequence))), vendor: Vendor(trusted: "com.x")))
        }
        var vector = VersionVector()
        vector.raise(to: 5, in: logs[0])
        feed.publish(entries, through: vector)
        var packed = PackedEvents(capacity: 16)
        #expect(packed.runs(at: [0, 1, 2, 3, 4], of: feed).runs.count == 1)
        // Another watcher that wants some of them: one run per stretch of neighbours.
        #expect(packed.runs(at: [0, 1, 3, 4], of: feed).runs.count == 2)
        #expect(packed.chunksHeld == 1)
    }

    @Test func erasedEventsLeaveNoBytesAndTheirNeighboursStillGoOut() {
        var feed = ChangeFeed(capacity: 100, holding: VersionVector())
        let vendor = Vendor(trusted: "com.x")
        let entries = (1...6).map { sequence in
            FeedEntry(
                log: logs[0], sequence: UInt64(sequence), time: HLCTimestamp(rawValue: 1),
                event: .bound(
                    account: AccountKey(vendor: vendor, account: UUID128(high: 0xACC, low: UInt64(sequence))),
                    device: DeviceID(UUID128(high: 1, low: UInt64(sequence))), bound: [DeviceID(UUID128(high: 1, low: UInt64(sequence)))]))
        }
        var vector = VersionVector()
        vector.raise(to: 6, in: logs[0])
        feed.publish(entries, through: vector)
        var packed = PackedEvents(capacity: 16)
        _ = packed.runs(at: [0, 1, 2], of: feed)
        let held = packed.runs(at: [3, 4, 5], of: feed).runs
        #expect(packed.chunksHeld == 2)
        func contains(_ text: String, _ buffers: [ByteBuffer]) -> Bool {
            buffers.contains { String(decoding: $0.readableBytesView, as: UTF8.self).contains(text) }
        }
        let erasedAccounts = [1, 3, 4, 5].map { UUID128(high: 0xACC, low: UInt64($0 + 1)).text }
        #expect(erasedAccounts.allSatisfy { contains($0, packed.chunkBytes) })

        packed.erase([1, 3, 4, 5])
        #expect(![1, 3, 4, 5].contains { packed.holds($0) } && packed.holds(0) && packed.holds(2))
        #expect(!erasedAccounts.contains { contains($0, packed.chunkBytes) }, "an erased event's account is still packed")
        // The second chunk had only erased events: it is gone. A frame being sent keeps its bytes.
        #expect(packed.chunksHeld == 1 && contains(erasedAccounts[1], held))
        var joined = ByteBuffer()
        for run in packed.runs(at: [0, 2], of: feed).runs { joined.writeImmutableBuffer(run) }
        #expect(joined == fieldsOneByOne([entries[0], entries[2]]))
    }
}
