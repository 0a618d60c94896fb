import NIOCore
import RegistryCore
import RegistryWire
import Testing

@testable import RegistryServer

/// The hub reads once for watchers that read alike: whatever it shares, each watcher's answer is
/// what its own reader, scanning its own copy of the feed, gives.
@Suite struct WatchHubTests {
    let logs = [LogID(origin: NodeID(trusted: "node-a"), epoch: 1), LogID(origin: NodeID(trusted: "node-b"), epoch: 2)]

    @Test(arguments: [1, 2, 3]) func sharedReadsAnswerAsEachReaderAlone(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        // The oracle's feed, published alike, and each watcher's own reader of it.
        var feed = ChangeFeed(capacity: 300, holding: VersionVector())
        let hub = WatchHub(feed: feed, maxWatchers: 100)
        var watchers: [(hub: FeedReader, alone: FeedReader, filter: FeedFilter)] = []
        // Another node's feed, which applied each commit's two logs in the other order, and its
        // readers: their cursors, resumed here, cover operations past the position they start at.
        var other = ChangeFeed(capacity: 300, holding: VersionVector())
        var otherReaders: [FeedReader] = []
        var sequences = [UInt64](repeating: 0, count: logs.count)
        for step in 0..<300 {
            var batch = [FeedEntry]()
            for _ in 0..<random.next() % 12 {
                let log = Int(random.next() % 2)
                sequences[log] += 1
                batch.append(
                    FeedEntry(
                        log: logs[log], sequence: sequences[log], time: HLCTimestamp(rawValue: UInt64(step) << 16),
                        event: .created(
                            device: DeviceID(UUID128(high: random.next(), low: random.next())),
                            vendor: Vendor(trusted: random.next() % 2 == 0 ? "com.x" : "com.y"))))
            }
            var vector = VersionVector()
            for (log, sequence) in zip(logs, sequences) where sequence > 0 { vector.raise(to: sequence, in: log) }
            feed.publish(batch, through: vector)
            hub.publish(batch, through: vector)
            other.publish(batch.filter { $0.log == logs[1] } + batch.filter { $0.log == logs[0] }, through: vector)
            if otherReaders.count < 3 { otherReaders.append(try FeedReader(feed: other, after: nil, filter: .everything)) }
            for index in otherReaders.indices {
                if (try? otherReaders[index].scan(other, limit: Int(random.next() % 7) + 1)) == nil {
                    otherReaders[index] = try FeedReader(feed: other, after: nil, filter: .everything)
                }
            }
            // New watchers: from now, or resumed from a cursor of this node's or the other's; two filters.
            if watchers.count < 8, random.next() % 6 == 0 {
                let filter = random.next() % 3 == 0 ? FeedFilter(vendors: ["com.x"]) : FeedFilter.everything
                let cursor: VersionVector? =
                    switch random.next() % 3 {
                    case 0: nil
                    case 1: otherReaders[Int(random.next() % UInt64(otherReaders.count))].cursor
                    default: watchers.isEmpty ? nil : watchers[Int(random.next() % UInt64(watchers.count))].alone.cursor
                    }
                let id = ObjectIdentifier(hub)
                guard let fromHub = try? hub.open(after: cursor, filter: filter, id: id, wake: {}) else { continue }
                watchers.append((fromHub, try FeedReader(feed: feed, after: cursor, filter: filter), filter))
            }
            // Most watchers read, most of them with the usual limit, in a random order.
            for index in watchers.indices.shuffled(using: &random) where random.next() % 4 != 0 {
                let limit = random.next() % 5 == 0 ? Int(random.next() % 30) + 1 : 64
                let before = watchers[index].hub
                let alone = Result { () throws(FeedReadError) in try watchers[index].alone.scan(feed, limit: limit) }
                let viaHub = Result { () throws(FeedReadError) in try hub.read(&watchers[index].hub, limit: limit, id: ObjectIdentifier(hub), wake: {}) }
                switch (alone, viaHub) {
                case (.success(let scan), .success(let read)):
                    #expect(read.scan == scan, "seed \(seed), step \(step)")
                    var joined = ByteBuffer()
                    for run in read.runs { joined.writeImmutableBuffer(run) }
                    var expected = ByteBuffer()
                    for position in scan.positions { try? WatchFrames.appendEventField(WatchEventMessage(feed[position]), to: &expected) }
                    #expect(joined == expected && read.bytes == expected.readableBytes)
                    #expect(watchers[index].hub.readsAlike(watchers[index].alone))
                    #expect(watchers[index].hub.cursor == watchers[index].alone.cursor)
                case (.failure, .failure):
                    // Expired alike: both start again from now.
                    watchers[index].hub = try #require(try? hub.open(after: nil, filter: watchers[index].filter, id: ObjectIdentifier(hub), wake: {}))
                    watchers[index].alone = try FeedReader(feed: feed, after: nil, filter: watchers[index].filter)
                default:
                    Issue.record("seed \(seed), step \(step): the hub and the reader alone disagree from \(before)")
                }
            }
        }
        // Watchers read alike often, and the hub answered them from one read.
        #expect(hub.readsShared > 100)
    }
}
