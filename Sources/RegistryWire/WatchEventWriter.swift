import RegistryCore

/// Encodes `registry.v1.WatchEvent` directly (``ProtobufWriter``): a node packs every event it
/// sends once, at the rate it registers, and building a protobuf-c message graph for each, then
/// sizing and packing it through protobuf-c's descriptors, cost most of that. The bytes are the
/// ones protobuf-c packs, field for field (`WatchEventWriterTests` compares them over seeded
/// random events). Decoding goes through protobuf-c.
enum WatchEventWriter {
    /// The encoded size of `event`.
    static func size(_ event: WatchEventMessage) -> Int {
        var size = ProtobufWriter.int32Size(Field.kind, event.kind)
            + ProtobufWriter.delimitedSize(Field.operation, length: operationSize(event.operation))
            + ProtobufWriter.uint64Size(Field.hlc, event.hlc) + ProtobufWriter.stringSize(Field.vendor, event.vendor)
            + ProtobufWriter.stringSize(Field.deviceID, event.deviceIDText)
            + ProtobufWriter.stringSize(Field.accountID, event.accountID)
            + ProtobufWriter.int32Size(Field.unbindReason, event.unbindReason.rawValue)
        for device in event.otherDeviceIDs { size += ProtobufWriter.elementSize(Field.otherDeviceIDs, device) }
        for device in event.boundDeviceIDs { size += ProtobufWriter.elementSize(Field.boundDeviceIDs, device) }
        return size
    }

    /// Writes `event`, ``size(_:)`` bytes.
    static func write(_ event: WatchEventMessage, to writer: inout ProtobufWriter) {
        writer.int32(Field.kind, event.kind)
        writer.header(Field.operation, length: operationSize(event.operation))
        writer.string(Field.origin, event.operation.origin)
        writer.uint64(Field.epoch, event.operation.epoch)
        writer.uint64(Field.sequence, event.operation.sequence)
        writer.uint64(Field.hlc, event.hlc)
        writer.string(Field.vendor, event.vendor)
        writer.string(Field.deviceID, event.deviceIDText)
        for device in event.otherDeviceIDs { writer.element(Field.otherDeviceIDs, device) }
        writer.string(Field.accountID, event.accountID)
        writer.int32(Field.unbindReason, event.unbindReason.rawValue)
        for device in event.boundDeviceIDs { writer.element(Field.boundDeviceIDs, device) }
    }

    /// Whether a string of `event` holds a NUL, which the protobuf-c decoders of every client
    /// would cut short: such an event is refused rather than sent.
    static func holdsNUL(_ event: WatchEventMessage) -> Bool {
        event.operation.origin.containsNUL || event.vendor.containsNUL || event.deviceIDText.containsNUL || event.accountID.containsNUL
            || event.otherDeviceIDs.contains(where: \.containsNUL) || event.boundDeviceIDs.contains(where: \.containsNUL)
    }

    private static func operationSize(_ position: LogPosition) -> Int {
        ProtobufWriter.stringSize(Field.origin, position.origin) + ProtobufWriter.uint64Size(Field.epoch, position.epoch)
            + ProtobufWriter.uint64Size(Field.sequence, position.sequence)
    }

    /// Field numbers, from `Protos/registry/v1/watch.proto` and `admin.proto` (`LogPosition`).
    private enum Field {
        /// `WatchEvent`.
        static let kind: UInt64 = 1, operation: UInt64 = 2, hlc: UInt64 = 3, vendor: UInt64 = 4, deviceID: UInt64 = 5
        static let otherDeviceIDs: UInt64 = 6, accountID: UInt64 = 7, unbindReason: UInt64 = 8, boundDeviceIDs: UInt64 = 9
        /// `LogPosition`.
        static let origin: UInt64 = 1, epoch: UInt64 = 2, sequence: UInt64 = 3
    }
}
