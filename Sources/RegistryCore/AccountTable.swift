/// An account within its vendor: the vendor and the keyed hash of the account's name.
public struct AccountKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let vendor: Vendor
    public let account: UUID128

    public init(vendor: Vendor, account: UUID128) {
        self.vendor = vendor
        self.account = account
    }

    public static func < (lhs: AccountKey, rhs: AccountKey) -> Bool {
        (lhs.vendor, lhs.account) < (rhs.vendor, rhs.account)
    }

    public var description: String { "\(vendor)/\(account.text)" }
}

/// Every binding change a replica holds, by account, and which accounts name each device: the
/// bindings part of ``RegistryState``.
///
/// It holds changes, not outcomes: which devices an account has now depends on the merges and
/// the vendor's policy, and is worked out when asked (``AccountBindings/resolve(policy:canonical:)``),
/// so that changes can arrive in any order and any number of times.
struct AccountTable: Sendable {
    private(set) var accounts: [AccountKey: AccountBindings] = [:]
    /// A device ID, as binding changes name it (it may have become an alias since), to the
    /// accounts whose changes name it, each once.
    private var naming: [UUID128: [AccountKey]] = [:]
    /// Binding changes held.
    private(set) var changeCount = 0

    /// Adds `change`; false when it was already held.
    mutating func insert(_ change: BindingChange) -> Bool {
        let key = AccountKey(vendor: change.vendor, account: change.account)
        guard accounts[key, default: AccountBindings()].insert(change) else { return false }
        changeCount += 1
        if !(naming[change.device.uuid]?.contains(key) ?? false) { naming[change.device.uuid, default: []].append(key) }
        return true
    }

    /// Removes every change that names one of `devices`; returns them.
    mutating func remove(naming devices: [UUID128]) -> [BindingChange] {
        var removed = [BindingChange]()
        for device in devices {
            for key in naming.removeValue(forKey: device) ?? [] {
                guard var account = accounts[key] else { continue }
                let gone = account.removeChanges { $0.device.uuid == device }
                removed += gone
                changeCount -= gone.count
                accounts[key] = account.changes.isEmpty ? nil : account
            }
        }
        return removed
    }

    /// The changes of `key`'s account; nil when it has none.
    func bindings(of key: AccountKey) -> AccountBindings? { accounts[key] }

    /// The accounts whose changes name any of `devices`, each once, sorted.
    func accounts(naming devices: [UUID128]) -> [AccountKey] {
        var keys = Set<AccountKey>()
        for device in devices { keys.formUnion(naming[device] ?? []) }
        return keys.sorted()
    }
}
