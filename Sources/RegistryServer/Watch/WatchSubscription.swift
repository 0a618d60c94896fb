import RegistryAuth
import RegistryCore
import RegistryWire

/// A watch request checked against the connection's token and the cluster: what to read from
/// the feed, from where. Pure.
struct WatchSubscription: Equatable {
    /// Resume after this; nil: from now.
    let cursor: VersionVector?
    let filter: FeedFilter
    /// When the token stops being valid (seconds since the Unix epoch); nil: never.
    let expiresAt: UInt64?

    /// Checks `request`: a cursor of this cluster that names valid logs, known event kinds, and
    /// vendors the token grants. Without vendors, the watcher gets every vendor the token
    /// grants.
    static func make(_ request: WatchRequestMessage, access: ConnectionAccess, clusterID: String) -> Result<WatchSubscription, WireError> {
        guard access.allows(.read) else { return .failure(ConnectionAccess.denied(.read)) }
        var cursor: VersionVector?
        if let given = request.cursor {
            guard given.clusterID == clusterID else {
                return .failure(
                    WireError(
                        code: .invalidCursor,
                        message: "the cursor was made by cluster \(given.clusterID.debugDescription); this node is of cluster \(clusterID.debugDescription)"))
            }
            do {
                // A node this one has not heard of is filed under a log no node holds: the cursor
                // is not held, as it is not, until the watcher asks again after it was heard of.
                let read = try VersionVector.fromClient(given.positions)
                var vector = read.heard
                if let furthest = read.unheard.map(\.sequence).max() {
                    vector.recordAll(through: furthest, in: VersionVector.unheardLog)
                }
                cursor = vector
            } catch {
                return .failure(WireError(code: .invalidCursor, message: "the cursor is malformed: \(error.message)"))
            }
        }
        var kinds: Set<FeedEventKind>?
        if !request.kinds.isEmpty {
            var known = Set<FeedEventKind>()
            for raw in request.kinds {
                guard let kind = FeedEventKind(rawValue: raw) else {
                    let names = FeedEventKind.allCases.map { "\($0) (\($0.rawValue))" }.joined(separator: ", ")
                    return .failure(WireError(code: .invalidArgument, message: "event kind \(raw) is none this node knows: \(names)"))
                }
                known.insert(kind)
            }
            kinds = known
        }
        var vendors: Set<String>?
        if !request.vendors.isEmpty {
            let names = Set(request.vendors.map { $0.lowercased() })
            if let refused = names.sorted().first(where: { !access.allows(.read, vendor: $0) }) {
                return .failure(ConnectionAccess.denied(.read, vendor: refused))
            }
            vendors = names
        } else if case .token(let token) = access, case .only(let granted) = token.vendors {
            vendors = granted
        }
        var expiresAt: UInt64?
        if case .token(let token) = access { expiresAt = token.expiresAt }
        return .success(WatchSubscription(cursor: cursor, filter: FeedFilter(vendors: vendors, kinds: kinds), expiresAt: expiresAt))
    }
}
