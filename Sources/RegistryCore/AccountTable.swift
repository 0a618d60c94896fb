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
///
/// Layout, for memory at millions of bindings: each change is one 48-byte ``Record`` in a paged
/// array, its vendor and origin interned; two ``RecordIndex``es, by (vendor, account) and by
/// device, hold only record numbers. A removed change (its device forgotten) leaves its record
/// behind, cleared and out of both indexes.
struct AccountTable: Sendable {
    /// One binding change.
    struct Record: Sendable {
        let account: UUID128
        let device: UUID128
        let time: UInt64
        let vendor: UInt32
        /// The interned origin shifted left by 2, or'ed with the kind's raw value; 0 once removed.
        var originAndKind: UInt32

        var isRemoved: Bool { originAndKind == 0 }
    }

    private var records = PagedArray<Record>()
    private var byAccount = RecordIndex()
    private var byDevice = RecordIndex()
    private var vendors = Interner<Vendor>()
    private var origins = Interner<NodeID>()
    /// Keys the two indexes' hashes, so that clients cannot choose accounts or devices whose
    /// entries collide without knowing it.
    private let seed: UInt64
    /// Binding changes held.
    private(set) var changeCount = 0

    init(seed: UInt64 = .random(in: .min ... .max)) {
        self.seed = seed
    }

    private static func accountHash(vendor: UInt32, account: UUID128, seed: UInt64) -> UInt64 {
        foldedMultiply(account.hash(seed: seed) ^ UInt64(vendor), 0x9E37_79B9_7F4A_7C15 ^ seed)
    }

    private static func deviceHash(_ device: UUID128, seed: UInt64) -> UInt64 { device.hash(seed: ~seed) }

    private func accountHash(vendor: UInt32, account: UUID128) -> UInt64 { Self.accountHash(vendor: vendor, account: account, seed: seed) }

    private func deviceHash(_ device: UUID128) -> UInt64 { Self.deviceHash(device, seed: seed) }

    /// Where each record's entries sit in the two indexes: what they need to grow and to
    /// delete. Reads a copy of the records (shared, not copied, while no record changes), so
    /// that it can run while an index is being changed.
    private func rehashers() -> (account: (UInt32) -> UInt64, device: (UInt32) -> UInt64) {
        let (records, seed) = (records, seed)
        return (
            { Self.accountHash(vendor: records[$0].vendor, account: records[$0].account, seed: seed) },
            { Self.deviceHash(records[$0].device, seed: seed) }
        )
    }

    /// The change a live record holds.
    private func change(_ record: Record) -> BindingChange {
        BindingChange(
            kind: BindingChange.Kind(rawValue: UInt8(record.originAndKind & 3))!, vendor: vendors[record.vendor], account: record.account,
            device: DeviceID(record.device), time: HLCTimestamp(rawValue: record.time), origin: origins[record.originAndKind >> 2])
    }

    /// Calls `body` with the number of every live record of (`vendor`, `account`).
    private func forEachRecord(vendor: UInt32, account: UUID128, _ body: (UInt32) -> Void) {
        byAccount.forEach(
            hash: accountHash(vendor: vendor, account: account), matching: { records[$0].vendor == vendor && records[$0].account == account },
            body)
    }

    /// Adds `change`; false when it was already held.
    mutating func insert(_ change: BindingChange) -> Bool {
        let vendor = vendors.intern(change.vendor)
        let origin = origins.intern(change.origin)
        precondition(origin < 1 << 30, "origins are numbered below 2^30")
        let originAndKind = origin << 2 | UInt32(change.kind.rawValue)
        var held = false
        forEachRecord(vendor: vendor, account: change.account) { number in
            let record = records[number]
            if record.device == change.device.uuid, record.time == change.time.rawValue, record.originAndKind == originAndKind { held = true }
        }
        guard !held else { return false }
        let number = UInt32(records.count)
        records.append(
            Record(account: change.account, device: change.device.uuid, time: change.time.rawValue, vendor: vendor, originAndKind: originAndKind))
        let rehash = rehashers()
        byAccount.insert(number, hash: accountHash(vendor: vendor, account: change.account), rehash: rehash.account)
        byDevice.insert(number, hash: deviceHash(change.device.uuid), rehash: rehash.device)
        changeCount += 1
        return true
    }

    /// Removes every change that names one of `devices`; returns them.
    mutating func remove(naming devices: [UUID128]) -> [BindingChange] {
        var removed = [BindingChange]()
        for device in devices {
            var numbers = [UInt32]()
            byDevice.forEach(hash: deviceHash(device), matching: { records[$0].device == device }) { numbers.append($0) }
            guard !numbers.isEmpty else { continue }
            do {
                let rehash = rehashers()
                for number in numbers {
                    removed.append(change(records[number]))
                    byAccount.remove(number, hash: rehash.account(number), rehash: rehash.account)
                    byDevice.remove(number, hash: deviceHash(device), rehash: rehash.device)
                }
            }
            // The rehashers' copy is gone: clearing the records changes them in place. Cleared
            // whole, so that a forgotten device's bindings leave memory at once.
            for number in numbers { records[number] = Record(account: .zero, device: .zero, time: 0, vendor: 0, originAndKind: 0) }
            changeCount -= numbers.count
        }
        return removed
    }

    /// The changes of `key`'s account; nil when it has none.
    func bindings(of key: AccountKey) -> AccountBindings? {
        var changes = [BindingChange]()
        guard let vendor = vendors.number(of: key.vendor) else { return nil }
        forEachRecord(vendor: vendor, account: key.account) { changes.append(change(records[$0])) }
        return changes.isEmpty ? nil : AccountBindings(changes: changes)
    }

    /// The accounts whose changes name any of `devices`, each once, sorted.
    func accounts(naming devices: [UUID128]) -> [AccountKey] {
        var keys = Set<AccountKey>()
        for device in devices {
            byDevice.forEach(hash: deviceHash(device), matching: { records[$0].device == device }) { number in
                keys.insert(AccountKey(vendor: vendors[records[number].vendor], account: records[number].account))
            }
        }
        return keys.sorted()
    }

    /// Calls `body` with every change held, in the order they were added.
    func forEachChange(_ body: (BindingChange) throws -> Void) rethrows {
        for number in 0..<UInt32(records.count) where !records[number].isRemoved { try body(change(records[number])) }
    }

    /// Buckets of the two indexes (for measurements).
    var indexCapacities: (accounts: Int, devices: Int) { (byAccount.capacity, byDevice.capacity) }
}
