import RegistryCore

/// Decodes watch frames, `ServerFrame`s whose body is `WatchEvents`, without protobuf-c: a
/// watcher decodes every event the cluster makes, and protobuf-c's generic unpacking took most
/// of a watching client's CPU.
///
/// It reads the usual shape only. A field the schema does not have is skipped, as protobuf-c
/// skips it. Anything else unusual gives nil, and ``ServerFrame/init(decoding:)`` hands the frame
/// to protobuf-c, whose rules decide: another body or a token, a sub-message twice (which
/// protobuf-c would merge), a wire type other than the field's, a length past the end. On what
/// it does read, the two agree (`WatchEventsReaderTests` compares them over seeded random frames
/// and mutations of them).
enum WatchEventsReader {
    /// The frame `bytes` holds, or nil when protobuf-c is to decode it.
    static func frame(_ bytes: UnsafeRawBufferPointer) -> ServerFrame? {
        var reader = ProtobufReader(bytes)
        var requestID: UInt64 = 0
        var events: WatchEventsMessage?
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let value = reader.varint() else { return nil }
                requestID = value
            case (13, .lengthDelimited):
                guard events == nil, let body = reader.delimited(), let decoded = watchEvents(body) else { return nil }
                events = decoded
            default:
                return nil
            }
        }
        guard let events else { return nil }
        return ServerFrame(requestID: requestID, body: .watchEvents(events))
    }

    private static func watchEvents(_ bytes: UnsafeRawBufferPointer) -> WatchEventsMessage? {
        var reader = ProtobufReader(bytes)
        var events = [WatchEventMessage]()
        var cursor: WatchCursor?
        var strings = RepeatedOriginAndVendor()
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard let body = reader.delimited(), let event = event(body, &strings) else { return nil }
                events.append(event)
            case (2, .lengthDelimited):
                guard cursor == nil, let body = reader.delimited(), let decoded = watchCursor(body) else { return nil }
                cursor = decoded
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return WatchEventsMessage(events: events, cursor: cursor)
    }

    private static func event(_ bytes: UnsafeRawBufferPointer, _ strings: inout RepeatedOriginAndVendor) -> WatchEventMessage? {
        var reader = ProtobufReader(bytes)
        var kind: UInt64 = 0
        var operation: LogPosition?
        var hlc: UInt64 = 0
        var vendor = ""
        var device = UUIDText("")
        var others = [String]()
        var account = ""
        var reason: UInt64 = 0
        var bound = [String]()
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .varint):
                guard let value = reader.varint() else { return nil }
                kind = value
            case (2, .lengthDelimited):
                guard operation == nil, let body = reader.delimited(), let position = logPosition(body, &strings) else { return nil }
                operation = position
            case (3, .varint):
                guard let value = reader.varint() else { return nil }
                hlc = value
            case (4, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                vendor = strings.vendor.string(text)
            case (5, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                device = UUIDText(utf8: text.assumingMemoryBound(to: UInt8.self))
            case (6, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                others.append(string(text))
            case (7, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                account = string(text)
            case (8, .varint):
                guard let value = reader.varint() else { return nil }
                reason = value
            case (9, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                bound.append(string(text))
            case (1...9, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return WatchEventMessage(
            kind: Int32(truncatingIfNeeded: kind), operation: operation ?? LogPosition(origin: "", epoch: 0, sequence: 0), hlc: hlc,
            vendor: vendor, deviceIDText: device, otherDeviceIDs: others, accountID: account,
            unbindReason: UnboundDeviceMessage.Reason(rawValue: Int32(truncatingIfNeeded: reason)) ?? .unspecified, boundDeviceIDs: bound)
    }

    private static func watchCursor(_ bytes: UnsafeRawBufferPointer) -> WatchCursor? {
        var reader = ProtobufReader(bytes)
        var clusterID = ""
        var positions = [LogPosition]()
        var strings = RepeatedOriginAndVendor()
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                clusterID = string(text)
            case (2, .lengthDelimited):
                guard let body = reader.delimited(), let position = logPosition(body, &strings) else { return nil }
                positions.append(position)
            case (1...2, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return WatchCursor(clusterID: clusterID, positions: positions)
    }

    private static func logPosition(_ bytes: UnsafeRawBufferPointer, _ strings: inout RepeatedOriginAndVendor) -> LogPosition? {
        var reader = ProtobufReader(bytes)
        var origin = ""
        var epoch: UInt64 = 0
        var sequence: UInt64 = 0
        while !reader.isAtEnd {
            guard let key = reader.key() else { return nil }
            switch (key.field, key.type) {
            case (1, .lengthDelimited):
                guard let text = reader.delimited() else { return nil }
                origin = strings.origin.string(text)
            case (2, .varint):
                guard let value = reader.varint() else { return nil }
                epoch = value
            case (3, .varint):
                guard let value = reader.varint() else { return nil }
                sequence = value
            case (1...3, _):
                return nil
            default:
                guard reader.skip(key.type) else { return nil }
            }
        }
        return LogPosition(origin: origin, epoch: epoch, sequence: sequence)
    }

    /// A string field's bytes as a string, a NUL kept (as ``CRead`` keeps it).
    private static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
