import CRegistryProto
import RegistryCore

/// `registry.v1.WatchCursor`: what a watcher has been given, as a version vector, and the
/// cluster that made it. Its text form (``text``, ``init(text:)``) is what `registryctl watch`
/// prints and `--from` takes: `CLUSTER@ORIGIN/EPOCH:SEQUENCE,…`.
public struct WatchCursor: Hashable, Sendable, CustomStringConvertible {
    public var clusterID: String
    public var positions: [LogPosition]

    public init(clusterID: String, positions: [LogPosition]) {
        self.clusterID = clusterID
        self.positions = positions.sorted { ($0.origin, $0.epoch) < ($1.origin, $1.epoch) }
    }

    /// `CLUSTER@ORIGIN/EPOCH:SEQUENCE,…`, positions in log order.
    public var text: String {
        clusterID + "@" + positions.map { "\($0.origin)/\($0.epoch):\($0.sequence)" }.joined(separator: ",")
    }

    public var description: String { text }

    /// Why cursor text does not parse.
    public struct Malformed: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Parses ``text``; the cluster is everything before the last `@`.
    public init(text: String) throws(Malformed) {
        guard let at = text.lastIndex(of: "@") else {
            throw Malformed(description: "cursor \(text.debugDescription) has no '@': expected CLUSTER@ORIGIN/EPOCH:SEQUENCE,…")
        }
        var positions = [LogPosition]()
        let rest = text[text.index(after: at)...]
        for part in rest.isEmpty ? [] : rest.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "/", maxSplits: 1)
            let numbers = pieces.count == 2 ? pieces[1].split(separator: ":") : []
            guard pieces.count == 2, numbers.count == 2, let epoch = UInt64(numbers[0]), let sequence = UInt64(numbers[1]), !pieces[0].isEmpty else {
                throw Malformed(description: "cursor position \(String(part).debugDescription) is not ORIGIN/EPOCH:SEQUENCE")
            }
            positions.append(LogPosition(origin: String(pieces[0]), epoch: epoch, sequence: sequence))
        }
        self.init(clusterID: String(text[..<at]), positions: positions)
    }
}

/// `registry.v1.WatchRequest`: which events to stream, from where.
public struct WatchRequestMessage: Hashable, Sendable {
    /// Vendor names; empty: every vendor the token reaches.
    public var vendors: [String]
    /// `registry.v1.WatchEventKind` values; empty: every kind. Kept raw, so that a kind this
    /// version does not know reaches the node, which refuses it by name.
    public var kinds: [Int32]
    /// Resume after this; nil: from now.
    public var cursor: WatchCursor?

    public init(vendors: [String] = [], kinds: [Int32] = [], cursor: WatchCursor? = nil) {
        self.vendors = vendors
        self.kinds = kinds
        self.cursor = cursor
    }
}

/// `registry.v1.WatchEvent`: one change, with the operation that made it.
public struct WatchEventMessage: Hashable, Sendable {
    /// `registry.v1.WatchEventKind` (``RegistryCore/FeedEventKind`` for the known ones).
    public var kind: Int32
    /// The operation: an idempotency key.
    public var operation: LogPosition
    /// The operation's HLC (milliseconds in the high 48 bits).
    public var hlc: UInt64
    public var vendor: String
    /// The device ID's text, held as a UUID when it is one (see ``UUIDText``): most events carry
    /// one and nothing else a String would be made for.
    public var deviceIDText: UUIDText
    /// Merged: the devices one with ``deviceID``; forgotten: the set's other devices.
    public var otherDeviceIDs: [String]
    /// Bound, unbound: the account's keyed hash, as UUID text.
    public var accountID: String
    public var unbindReason: UnboundDeviceMessage.Reason
    /// Bound, unbound: every device the account is bound to now.
    public var boundDeviceIDs: [String]

    public init(
        kind: Int32, operation: LogPosition, hlc: UInt64, vendor: String, deviceID: String, otherDeviceIDs: [String] = [],
        accountID: String = "", unbindReason: UnboundDeviceMessage.Reason = .unspecified, boundDeviceIDs: [String] = []
    ) {
        self.init(
            kind: kind, operation: operation, hlc: hlc, vendor: vendor, deviceIDText: UUIDText(deviceID), otherDeviceIDs: otherDeviceIDs,
            accountID: accountID, unbindReason: unbindReason, boundDeviceIDs: boundDeviceIDs)
    }

    public init(
        kind: Int32, operation: LogPosition, hlc: UInt64, vendor: String, deviceIDText: UUIDText, otherDeviceIDs: [String] = [],
        accountID: String = "", unbindReason: UnboundDeviceMessage.Reason = .unspecified, boundDeviceIDs: [String] = []
    ) {
        self.kind = kind
        self.operation = operation
        self.hlc = hlc
        self.vendor = vendor
        self.deviceIDText = deviceIDText
        self.otherDeviceIDs = otherDeviceIDs
        self.accountID = accountID
        self.unbindReason = unbindReason
        self.boundDeviceIDs = boundDeviceIDs
    }

    /// The operation's wall-clock milliseconds.
    public var millis: UInt64 { hlc >> 16 }

    /// The device ID's text.
    public var deviceID: String {
        get { deviceIDText.text }
        set { deviceIDText = UUIDText(newValue) }
    }
}

/// `registry.v1.WatchEvents`: events in the node's apply order, and the cursor after them (nil
/// inside a batch that a later frame's cursor ends).
public struct WatchEventsMessage: Hashable, Sendable {
    public var events: [WatchEventMessage]
    public var cursor: WatchCursor?

    public init(events: [WatchEventMessage], cursor: WatchCursor?) {
        self.events = events
        self.cursor = cursor
    }
}

/// Converts watch requests and events between their Swift and protobuf-c forms.
enum WatchCodec {
    static func cursor(_ message: UnsafeMutablePointer<Registry__V1__WatchCursor>?) throws(CodecError) -> WatchCursor? {
        guard let cursor = message?.pointee else { return nil }
        return WatchCursor(clusterID: CRead.string(cursor.cluster_id), positions: try CRead.positions(cursor.n_positions, cursor.positions))
    }

    static func cursor(_ cursor: WatchCursor?, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__WatchCursor>? {
        guard let cursor else { return nil }
        var message = Registry__V1__WatchCursor()
        registry__v1__watch_cursor__init(&message)
        message.cluster_id = arena.string(cursor.clusterID)
        (message.n_positions, message.positions) = arena.positions(cursor.positions)
        return arena.new(message)
    }

    static func request(_ message: Registry__V1__WatchRequest) throws(CodecError) -> WatchRequestMessage {
        let kinds = message.kinds.map { pointer in (0..<message.n_kinds).map { Int32(truncatingIfNeeded: pointer[$0].rawValue) } } ?? []
        return WatchRequestMessage(vendors: CRead.strings(message.n_vendors, message.vendors), kinds: kinds, cursor: try cursor(message.cursor))
    }

    static func request(_ request: WatchRequestMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__WatchRequest> {
        var message = Registry__V1__WatchRequest()
        registry__v1__watch_request__init(&message)
        (message.n_vendors, message.vendors) = arena.strings(request.vendors)
        message.n_kinds = request.kinds.count
        message.kinds = arena.array(request.kinds.map { Registry__V1__WatchEventKind(rawValue: .init(truncatingIfNeeded: $0)) })
        message.cursor = cursor(request.cursor, in: arena)
        return arena.new(message)
    }

    static func events(_ message: Registry__V1__WatchEvents) throws(CodecError) -> WatchEventsMessage {
        let events = try CRead.messages(message.n_events, message.events) { (event: Registry__V1__WatchEvent) throws(CodecError) in
            let operation = event.operation?.pointee
            return WatchEventMessage(
                kind: Int32(truncatingIfNeeded: event.kind.rawValue),
                operation: LogPosition(
                    origin: CRead.string(operation?.origin), epoch: operation?.epoch ?? 0, sequence: operation?.sequence ?? 0),
                hlc: event.hlc, vendor: CRead.string(event.vendor), deviceIDText: CRead.uuidText(event.device_id),
                otherDeviceIDs: CRead.strings(event.n_other_device_ids, event.other_device_ids), accountID: CRead.string(event.account_id),
                unbindReason: UnboundDeviceMessage.Reason(rawValue: Int32(truncatingIfNeeded: event.unbind_reason.rawValue)) ?? .unspecified,
                boundDeviceIDs: CRead.strings(event.n_bound_device_ids, event.bound_device_ids))
        }
        return WatchEventsMessage(events: events, cursor: try cursor(message.cursor))
    }

    static func events(_ batch: WatchEventsMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__WatchEvents> {
        var message = Registry__V1__WatchEvents()
        registry__v1__watch_events__init(&message)
        message.n_events = batch.events.count
        message.events = arena.array(count: batch.events.count) { index in Optional(event(batch.events[index], in: arena)) }
        message.cursor = cursor(batch.cursor, in: arena)
        return arena.new(message)
    }

    static func event(_ event: WatchEventMessage, in arena: CArena) -> UnsafeMutablePointer<Registry__V1__WatchEvent> {
        var wire = Registry__V1__WatchEvent()
        registry__v1__watch_event__init(&wire)
        wire.kind = Registry__V1__WatchEventKind(rawValue: .init(truncatingIfNeeded: event.kind))
        var operation = Registry__V1__LogPosition()
        registry__v1__log_position__init(&operation)
        operation.origin = arena.string(event.operation.origin)
        operation.epoch = event.operation.epoch
        operation.sequence = event.operation.sequence
        wire.operation = arena.new(operation)
        wire.hlc = event.hlc
        wire.vendor = arena.string(event.vendor)
        wire.device_id = arena.string(event.deviceIDText)
        (wire.n_other_device_ids, wire.other_device_ids) = arena.strings(event.otherDeviceIDs)
        wire.account_id = arena.string(event.accountID)
        wire.unbind_reason = Registry__V1__UnbindReason(rawValue: .init(truncatingIfNeeded: event.unbindReason.rawValue))
        (wire.n_bound_device_ids, wire.bound_device_ids) = arena.strings(event.boundDeviceIDs)
        return arena.new(wire)
    }
}
