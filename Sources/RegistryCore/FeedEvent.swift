/// A change of the registry that a watcher hears of (`docs/cluster.md`, "Watching changes"): what
/// applying one operation changed in this replica's state, as the replica saw it.
///
/// Events describe the state, not the operation: the same operation can give different events on
/// two replicas that applied operations in different orders (a merge of two concurrent first
/// installs is reported by whichever of the two a replica applied second). Folded in the order a
/// replica gives them, they bring a follower's view to that replica's state.
///
/// The cases larger than a first install's are `indirect`: a node holds a million events for its
/// watchers (`--watch-history`), nearly all of them `created`, and each takes the size of the
/// largest inline case (`docs/performance.md`, "The change feed").
public enum FeedEvent: Hashable, Sendable {
    /// A device this replica did not hold before.
    case created(device: DeviceID, vendor: Vendor)
    /// `replaced` are one device with `winner` from now on: every device of the merge set other
    /// than the winner, not only the ones this change joined, so that the event stands alone.
    indirect case merged(winner: DeviceID, replaced: [DeviceID], vendor: Vendor)
    /// The devices of a forgotten merge set (``ForgetOp``); `vendor` is nil for a device the
    /// replica does not hold (the forget arrived first).
    case forgotten(devices: [DeviceID], vendor: Vendor?)
    /// The account is bound to the device now; `bound` is every device it is bound to now.
    indirect case bound(account: AccountKey, device: DeviceID, bound: [DeviceID])
    /// The account is not bound to the device now: an unbind, the policy (replaced by another
    /// device), or its bind lost to concurrent ones (``UnboundDevice/Reason``); `bound` is every
    /// device it is bound to now.
    indirect case unbound(account: AccountKey, device: DeviceID, reason: UnboundDevice.Reason, bound: [DeviceID])
    /// The device's keychain UUID was seen with two IDFVs that are both in use (``CloneOp``,
    /// flagged): most likely a backup restored onto a second phone. The device is unchanged.
    case cloneSuspected(device: DeviceID, vendor: Vendor)
    /// As ``cloneSuspected(device:vendor:)``, and the later IDFV now has `newDevice` of its own
    /// (``CloneOp``, split).
    indirect case split(device: DeviceID, newDevice: DeviceID, vendor: Vendor)
    /// What an account event said before a forget of a device it named (``ChangeFeed``'s
    /// erasure, `docs/security.md`): nothing is left of it. No filter matches it, so no watcher
    /// is sent it, and its place in the feed (its operation) stays.
    case erased

    /// What kind of change it is, for filters; nil for ``erased``, which no filter matches.
    public var kind: FeedEventKind? {
        switch self {
        case .erased: return nil
        case .created: return .created
        case .merged: return .merged
        case .forgotten: return .forgotten
        case .bound: return .bound
        case .unbound: return .unbound
        case .cloneSuspected: return .cloneSuspected
        case .split: return .split
        }
    }

    /// Whether an account event (bound or unbound) names one of `devices`, as the device it is
    /// about or among the devices the account is bound to.
    func namesAccount(with devices: Set<DeviceID>) -> Bool {
        switch self {
        case .bound(_, let device, let bound), .unbound(_, let device, _, let bound):
            return devices.contains(device) || bound.contains { devices.contains($0) }
        default: return false
        }
    }

    /// The vendor the change belongs to; nil only for a forget of a device this replica never
    /// held, and for ``erased``.
    public var vendor: Vendor? {
        switch self {
        case .erased: return nil
        case .created(_, let vendor), .merged(_, _, let vendor): return vendor
        case .forgotten(_, let vendor): return vendor
        case .cloneSuspected(_, let vendor), .split(_, _, let vendor): return vendor
        case .bound(let account, _, _), .unbound(let account, _, _, _): return account.vendor
        }
    }
}

/// The kinds of ``FeedEvent``, as a watcher filters them.
public enum FeedEventKind: Int32, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case created = 1
    case merged = 2
    case bound = 3
    case unbound = 4
    case forgotten = 5
    case cloneSuspected = 6
    case split = 7

    /// The name `registryctl watch --kind` takes and JSON output shows.
    public var description: String {
        switch self {
        case .created: return "created"
        case .merged: return "merged"
        case .bound: return "bound"
        case .unbound: return "unbound"
        case .forgotten: return "forgotten"
        case .cloneSuspected: return "clone_suspected"
        case .split: return "split"
        }
    }

    /// The kind named `name` (see ``description``); nil for no kind.
    public init?(name: String) {
        guard let kind = Self.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
        self = kind
    }
}
