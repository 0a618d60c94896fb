import RegistryCore
import RegistryWire

extension WatchEventMessage {
    /// The wire form of one event of the feed, which is not ``FeedEvent/erased``.
    init(_ entry: FeedEntry) {
        let operation = LogPosition(origin: entry.log.origin.value, epoch: entry.log.epoch, sequence: entry.sequence)
        let event = entry.event
        let (kind, vendor) = (event.kind?.rawValue ?? 0, event.vendor?.name ?? "")
        switch event {
        case .erased:
            // A reader passes over erased events, and packs only the events it read.
            preconditionFailure("an erased event of the feed is never sent")
        case .created(let device, _):
            self.init(kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceIDText: UUIDText(uuid: device.uuid))
        case .merged(let winner, let replaced, _):
            self.init(
                kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceID: winner.description,
                otherDeviceIDs: replaced.map(\.description))
        case .forgotten(let devices, _):
            self.init(
                kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceID: devices.first?.description ?? "",
                otherDeviceIDs: devices.dropFirst().map(\.description))
        case .bound(let account, let device, let bound):
            self.init(
                kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceID: device.description,
                accountID: account.account.text, boundDeviceIDs: bound.map(\.description))
        case .unbound(let account, let device, let reason, let bound):
            self.init(
                kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceID: device.description,
                accountID: account.account.text, unbindReason: UnboundDeviceMessage.Reason(reason), boundDeviceIDs: bound.map(\.description))
        case .cloneSuspected(let device, _):
            self.init(kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceIDText: UUIDText(uuid: device.uuid))
        case .split(let device, let newDevice, _):
            self.init(
                kind: kind, operation: operation, hlc: entry.time.rawValue, vendor: vendor, deviceID: device.description,
                otherDeviceIDs: [newDevice.description])
        }
    }
}

extension UnboundDeviceMessage.Reason {
    /// The wire form of why a device is not bound.
    init(_ reason: UnboundDevice.Reason) {
        switch reason {
        case .unbound: self = .unbound
        case .replaced: self = .replaced
        case .refused: self = .refused
        }
    }
}

extension WatchCursor {
    /// The cursor of `vector`, made by `clusterID`.
    init(clusterID: String, vector: VersionVector) {
        self.init(clusterID: clusterID, positions: vector.positions)
    }
}
