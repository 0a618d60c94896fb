import NIOCore
import Testing
@testable import RegistryWire

/// Watch requests, events and cursors through protobuf-c, and frames built around events packed
/// once, which must be the bytes packing the whole frame gives.
@Suite struct WatchCodecTests {
    let events = [
        WatchEventMessage(
            kind: 2, operation: LogPosition(origin: "node-a", epoch: 7, sequence: 42), hlc: 1 << 40, vendor: "com.vendor",
            deviceID: "00000000-0000-0000-0000-000000000001", otherDeviceIDs: ["00000000-0000-0000-0000-000000000002"]),
        WatchEventMessage(
            kind: 4, operation: LogPosition(origin: "node-b", epoch: 1, sequence: 300), hlc: 5, vendor: "com.vendor",
            deviceID: "00000000-0000-0000-0000-000000000003", accountID: "00000000-0000-0000-0000-0000000000aa", unbindReason: .replaced,
            boundDeviceIDs: ["00000000-0000-0000-0000-000000000004"]),
    ]
    let cursor = WatchCursor(
        clusterID: "prod", positions: [LogPosition(origin: "node-b", epoch: 1, sequence: 300), LogPosition(origin: "node-a", epoch: 7, sequence: 42)])

    @Test func aWatchRoundTripsAndItsPackedFramesAreTheWholeFramesBytes() throws {
        // 2 events (a body under 128 bytes), then 400 (a length of 3 varint bytes), each sent as
        // one run of fields and as runs of one field each.
        for events in [events, Array(repeating: events, count: 200).flatMap { $0 }] {
            var fields = ByteBuffer()
            var single = [ByteBuffer]()
            for event in events {
                var one = ByteBuffer()
                try WatchFrames.appendEventField(event, to: &one)
                single.append(one)
                try WatchFrames.appendEventField(event, to: &fields)
            }
            for requestID: UInt64 in [0, 1, 300] {
                for cursor in [nil, cursor] {
                    let whole = ServerFrame(requestID: requestID, body: .watchEvents(WatchEventsMessage(events: events, cursor: cursor)))
                    var expected = ByteBuffer()
                    try whole.encodeFrame(into: &expected)
                    for runs in [[fields], single] {
                        var built = ByteBuffer()
                        WatchFrames.write(requestID: requestID, eventFields: runs, cursorField: try cursor.map(WatchFrames.cursorField), into: &built)
                        #expect(built == expected, "request \(requestID), cursor \(cursor?.text ?? "none"), \(runs.count) runs")
                        built.moveReaderIndex(forwardBy: 4)
                        #expect(try ServerFrame(decoding: built) == whole)
                    }
                }
            }
        }
    }

    @Test func anEventTheCodecRefusesLeavesTheBufferAsItWas() throws {
        var fields = ByteBuffer()
        try WatchFrames.appendEventField(events[0], to: &fields)
        let before = fields
        var bad = events[1]
        bad.vendor = "com.ven\u{0}dor"
        #expect(throws: CodecError.self) { try WatchFrames.appendEventField(bad, to: &fields) }
        #expect(fields == before)
    }

    @Test func aWatchRequestRoundTrips() throws {
        let request = ClientFrame(requestID: 9, body: .watch(WatchRequestMessage(vendors: ["com.vendor"], kinds: [1, 99], cursor: cursor)))
        var bytes = ByteBuffer()
        try request.encode(into: &bytes)
        #expect(try ClientFrame(decoding: bytes) == request)
    }

    @Test func cursorTextRoundTripsAndBadTextSaysWhatIsWrong() throws {
        #expect(cursor.text == "prod@node-a/7:42,node-b/1:300")
        #expect(try WatchCursor(text: cursor.text) == cursor)
        #expect(try WatchCursor(text: "a@b@") == WatchCursor(clusterID: "a@b", positions: []))
        for bad in ["no-at-sign", "c@node-a/7", "c@node-a/x:1", "c@/1:2", "c@node-a/1:2,"] {
            #expect(throws: WatchCursor.Malformed.self, "\(bad)") { try WatchCursor(text: bad) }
        }
    }
}
