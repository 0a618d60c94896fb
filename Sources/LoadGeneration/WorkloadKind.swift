/// The registration patterns `registryload` can generate, as the product sees them in the field.
public enum WorkloadKind: String, CaseIterable, Codable, Sendable, Comparable {
    /// A device never seen before: new keychain UUID, new IDFV.
    case firstInstall = "first-install"
    /// A known device opening the same app again: same keychain UUID, same IDFV.
    case returning
    /// Another app of the same vendor on a known device: same keychain UUID and IDFV (both are
    /// shared across a vendor's apps), a different bundle.
    case sibling
    /// A known device after every app of the vendor was removed: the keychain UUID survives,
    /// the IDFV is new.
    case reinstall
    /// A known device whose keychain was lost (restore, new phone): new keychain UUID, same IDFV.
    case lostKeychain = "lost-keychain"
    /// A new device registered by two sibling apps at the same moment, through two connections
    /// (to two different endpoints when there are several). Counts how often the two callers
    /// were told different device IDs.
    case concurrentSiblings = "concurrent-siblings"
    /// A user logs in on a known device for the first time: a new account is bound to it
    /// (BindRequest; the vendor's policy must allow the first device, as every policy does).
    case bind
    /// A user with an account moves to another known device of the vendor: the account is
    /// unbound from its device, then bound to the new one (two requests on one connection, in
    /// order), so that it works under every policy.
    case move

    /// Whether this kind needs a device the registry has already acknowledged.
    public var needsKnownDevice: Bool {
        switch self {
        case .firstInstall, .concurrentSiblings: return false
        case .returning, .sibling, .reinstall, .lostKeychain, .bind, .move: return true
        }
    }

    /// Whether this kind binds accounts rather than registering devices.
    public var isBinding: Bool { self == .bind || self == .move }

    /// The kind's position in ``allCases``.
    public var index: Int {
        switch self {
        case .firstInstall: return 0
        case .returning: return 1
        case .sibling: return 2
        case .reinstall: return 3
        case .lostKeychain: return 4
        case .concurrentSiblings: return 5
        case .bind: return 6
        case .move: return 7
        }
    }

    public static func < (lhs: WorkloadKind, rhs: WorkloadKind) -> Bool {
        lhs.index < rhs.index
    }
}

/// A weighted mix of workload kinds, parsed from `first-install` or
/// `first-install=60,returning=30,sibling=10`.
public struct WorkloadMix: Sendable, CustomStringConvertible {
    /// Kinds with positive weights, in declaration order.
    public let weights: [(kind: WorkloadKind, weight: Int)]

    public init(parsing text: String) throws(LoadConfigurationError) {
        var found = [WorkloadKind: Int]()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pieces[0].trimmingSpaces
            guard let kind = WorkloadKind(rawValue: name) else {
                throw .invalidWorkload(
                    "unknown workload \"\(name)\"; known: \(WorkloadKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            var weight = 1
            if pieces.count == 2 {
                guard let parsed = Int(pieces[1].trimmingSpaces), parsed >= 0 else {
                    throw .invalidWorkload("weight of \(name) must be a whole number >= 0, got \"\(pieces[1])\"")
                }
                weight = parsed
            }
            guard found[kind] == nil else { throw .invalidWorkload("\(name) is named twice") }
            found[kind] = weight
        }
        let weights = WorkloadKind.allCases.compactMap { kind in found[kind].flatMap { $0 > 0 ? (kind, $0) : nil } }
        guard !weights.isEmpty else { throw .invalidWorkload("every weight is zero") }
        self.weights = weights
    }

    public var totalWeight: Int { weights.reduce(0) { $0 + $1.weight } }

    /// Whether any kind needs acknowledged devices to pick from.
    public var needsKnownDevices: Bool { weights.contains { $0.kind.needsKnownDevice } }

    /// Picks a kind with probability proportional to its weight.
    public func pick(using generator: inout some RandomNumberGenerator) -> WorkloadKind {
        var roll = Int.random(in: 0..<totalWeight, using: &generator)
        for (kind, weight) in weights {
            if roll < weight { return kind }
            roll -= weight
        }
        return weights[weights.count - 1].kind
    }

    public var description: String {
        weights.count == 1 ? weights[0].kind.rawValue : weights.map { "\($0.kind.rawValue)=\($0.weight)" }.joined(separator: ",")
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
