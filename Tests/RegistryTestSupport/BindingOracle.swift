import RegistryCore

/// The binding rule (docs/identity.md, "Accounts") written out once more, apart from the code it
/// checks: the changes sorted as plain tuples (HLC, origin's text, kind, device's two words), then
/// replayed over a list of (device, first bind, latest bind) with linear scans, where
/// ``AccountBindings`` keeps a sorted history with binary insertion and a dictionary.
public enum BindingOracle {
    /// A bound device: its first and latest bind's HLC.
    public struct Bound: Equatable, Sendable, CustomStringConvertible {
        public let device: DeviceID
        public let since: UInt64
        public let lastActive: UInt64
        public var description: String { "\(device) since \(since), active \(lastActive)" }
    }

    /// A device not bound, why, and the HLC of the change that unbound it.
    public struct Unbound: Equatable, Sendable, CustomStringConvertible {
        public let device: DeviceID
        public let reason: UnboundDevice.Reason
        public let time: UInt64
        public var description: String { "\(device) \(reason) at \(time)" }
    }

    /// One account's devices.
    public struct Expected: Equatable, Sendable {
        public var bound: [Bound]
        public var unbound: [Unbound]
    }

    /// What the rule makes of `changes` (one account's, repeats allowed) under `policy`, each
    /// device taken to `canonical(device)` and skipped where that is nil.
    public static func expected(_ changes: [BindingChange], policy: BindingPolicy, canonical: (DeviceID) -> DeviceID?) -> Expected {
        let ordered = Set(changes).sorted {
            ($0.time.rawValue, $0.origin.value, $0.kind.rawValue, $0.device.uuid.high, $0.device.uuid.low)
                < ($1.time.rawValue, $1.origin.value, $1.kind.rawValue, $1.device.uuid.high, $1.device.uuid.low)
        }
        var list: [(device: DeviceID, first: UInt64, latest: UInt64)] = []
        var lost: [DeviceID: (reason: UnboundDevice.Reason, time: UInt64)] = [:]
        for change in ordered {
            guard let device = canonical(change.device) else { continue }
            let time = change.time.rawValue
            if change.kind == .unbind {
                if let index = list.firstIndex(where: { $0.device == device }) {
                    list.remove(at: index)
                    lost[device] = (.unbound, time)
                }
                continue
            }
            var windowStart: UInt64 = 0
            if let days = policy.activeWithinDays {
                let span = UInt64(days) * 86_400_000
                windowStart = change.time.millis > span ? change.time.millis - span : 0
            }
            let isCounted = { (entry: (device: DeviceID, first: UInt64, latest: UInt64)) in entry.latest >> 16 >= windowStart }
            if let index = list.firstIndex(where: { $0.device == device }), isCounted(list[index]) {
                list[index].latest = max(list[index].latest, time)
                continue
            }
            let others = list.indices.filter { list[$0].device != device && isCounted(list[$0]) }
            if others.count >= policy.maxDevices {
                if policy.pastLimit == .reject {
                    if !list.contains(where: { $0.device == device }) { lost[device] = (.refused, time) }
                    continue
                }
                let oldest = others.min {
                    (list[$0].latest, list[$0].device.uuid.high, list[$0].device.uuid.low)
                        < (list[$1].latest, list[$1].device.uuid.high, list[$1].device.uuid.low)
                }!
                lost[list[oldest].device] = (.replaced(by: device), time)
                list.remove(at: oldest)
            }
            if let index = list.firstIndex(where: { $0.device == device }) {
                list[index].latest = max(list[index].latest, time)
            } else {
                list.append((device, time, time))
                lost[device] = nil
            }
        }
        let byDevice = { (a: DeviceID, b: DeviceID) in (a.uuid.high, a.uuid.low) < (b.uuid.high, b.uuid.low) }
        return Expected(
            bound: list.sorted { byDevice($0.device, $1.device) }.map { Bound(device: $0.device, since: $0.first, lastActive: $0.latest) },
            unbound: lost.sorted { byDevice($0.key, $1.key) }.map { Unbound(device: $0.key, reason: $0.value.reason, time: $0.value.time) })
    }

    /// What ``AccountBindings`` resolved, in the oracle's terms.
    public static func observed(_ resolution: AccountBindings.Resolution) -> Expected {
        Expected(
            bound: resolution.bound.map { Bound(device: $0.device, since: $0.since.rawValue, lastActive: $0.lastActive.rawValue) },
            unbound: resolution.unbound.map { Unbound(device: $0.device, reason: $0.reason, time: $0.time.rawValue) })
    }
}
