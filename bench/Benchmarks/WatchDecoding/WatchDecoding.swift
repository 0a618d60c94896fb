// What a watcher pays to decode the change feed, per frame of 100 `created` events shaped as a
// node sends them under registryload's batched load (10 vendors, one origin, UUID device IDs),
// measured with ordo-one's package-benchmark (`swift package benchmark --target WatchDecoding`;
// bench/feed.sh runs it and writes the figures to BENCHMARKS.md). In one run:
// - the client library's decoding, `ServerFrame(decoding:)`, which `RegistryWatch` calls for
//   every frame, and the frame's events dropped, as a watcher's loop drops them;
// - the floor: a walk over the same bytes that reads every field of every event (keys, varints,
//   lengths) and builds nothing (bench/WireWalk, written apart from the code it bounds);
// - `UUIDText(utf8:)` alone, the device ID's parsing, which the node's request path shares;
// - the node's side: `WatchFrames.appendEventField`, one event packed (once for every watcher).
import Benchmark
import NIOCore
import RegistryCore
import RegistryWire
import WireWalk

/// Events in each frame; the figures are per frame.
private let eventsPerFrame = 100

/// 16 frames, read in turn, each a whole `ServerFrame` payload (no length prefix).
private let frames: [ByteBuffer] = {
    var generator = SplitMix64(seed: 41)
    var sequence: UInt64 = 1
    return (0..<16).map { _ in
        let events = (0..<eventsPerFrame).map { _ in
            defer { sequence += 1 }
            return WatchEventMessage(
                kind: FeedEventKind.created.rawValue, operation: LogPosition(origin: "node-94d1718d", epoch: 1, sequence: sequence),
                hlc: (1_764_000_000_000 + sequence / 50) << 16 | (sequence & 0xFF), vendor: "com.load\(generator.next() % 10)",
                deviceID: UUID128(high: generator.next(), low: generator.next()).text)
        }
        let cursor = WatchCursor(clusterID: "cluster-5f3a", positions: [LogPosition(origin: "node-94d1718d", epoch: 1, sequence: sequence)])
        var buffer = ByteBuffer()
        try! ServerFrame(requestID: 1, body: .watchEvents(WatchEventsMessage(events: events, cursor: cursor))).encode(into: &buffer)
        return buffer
    }
}()

/// 1,024 created events as the node packs them.
private let createdEvents: [WatchEventMessage] = {
    var generator = SplitMix64(seed: 43)
    return (0..<1_024).map { index in
        WatchEventMessage(
            kind: FeedEventKind.created.rawValue, operation: LogPosition(origin: "node-94d1718d", epoch: 1, sequence: UInt64(index + 1)),
            hlc: 1_764_000_000_000 << 16, vendor: "com.load\(generator.next() % 10)", deviceIDText: UUIDText(uuid: UUID128(high: generator.next(), low: generator.next())))
    }
}()

/// 1,024 device IDs as UUID text, for the parser alone.
private let deviceIDs: [[UInt8]] = {
    var generator = SplitMix64(seed: 42)
    return (0..<1_024).map { _ in Array(UUID128(high: generator.next(), low: generator.next()).text.utf8) }
}()

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(3))

    Benchmark("ServerFrame(decoding:), a frame of 100 events") { benchmark in
        for index in benchmark.scaledIterations { blackHole(try ServerFrame(decoding: frames[index & 15])) }
    }
    Benchmark("UUIDText(utf8:), one device ID") { benchmark in
        for index in benchmark.scaledIterations { blackHole(deviceIDs[index & 1_023].withUnsafeBufferPointer { UUIDText(utf8: $0) }) }
    }
    Benchmark("WatchFrames.appendEventField, one created event") { benchmark in
        var buffer = ByteBufferAllocator().buffer(capacity: 1 << 16)
        for index in benchmark.scaledIterations {
            if buffer.writerIndex > 60_000 { buffer.clear() }
            try WatchFrames.appendEventField(createdEvents[index & 1_023], to: &buffer)
        }
        blackHole(buffer)
    }
    Benchmark("floor: every field of a frame of 100 events read, nothing built") { benchmark in
        for index in benchmark.scaledIterations { blackHole(frames[index & 15].withUnsafeReadableBytes { WireWalk.serverFrame($0) }) }
    }
}
