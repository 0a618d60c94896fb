import RegistryCore
import RegistryWire

/// What the generator believes about one device the registry acknowledged: its identifiers,
/// the ID it was given, and every identifier it ever presented (for `--verify`).
public struct ModelDevice: Sendable {
    public let vendor: Int
    public let homeApp: Int
    public internal(set) var keychain: UUID128
    public internal(set) var idfv: UUID128
    /// The ID the first acknowledgement named.
    public let deviceID: UUID128
    /// For a concurrent-siblings pair told two different IDs: the other one. The registry must
    /// still converge on one of them.
    public let otherID: UUID128?
    /// Identifiers presented earlier and since replaced (old IDFVs, lost keychain UUIDs).
    public internal(set) var replaced: [Identifier] = []
    /// The causal tokens of the device's acknowledged registrations, merged: what an app keeps
    /// beside its keychain UUID and sends with its next registration, from any of the vendor's
    /// apps, to any node.
    public internal(set) var token: CausalToken = .empty

    /// Every identifier the device has claimed, current ones first.
    public var claims: [Identifier] {
        [Identifier(kind: .keychain, value: keychain), Identifier(kind: .idfv, value: idfv)] + replaced
    }

    /// Whether `id` is an answer consistent with what was acknowledged.
    public func accepts(_ id: UUID128) -> Bool { id == deviceID || id == otherID }
}

/// An account a run bound, as the run believes the registry holds it.
public struct ModelAccount: Sendable {
    /// The account's name, `load-<seed>-<number>`.
    public let name: String
    public let vendor: Int
    /// The model device the account is bound to; nil until its bind is acknowledged, and after a
    /// bind or a move that failed.
    public internal(set) var device: Int?
}
