import Crypto
import RegistryCore

/// The cluster's key for identifiers at rest. A node never keeps a presented IDFV or keychain
/// UUID: it keeps HMAC-SHA256(key, kind byte ‖ the UUID's 16 bytes), cut to 128 bits, in the
/// identifier's place — in memory, in the journal, in snapshots and on the replication stream.
/// A lookup hashes what it is given and finds the same value.
///
/// The key is derived from the cluster secret (`--cluster-secret`), as the minting key is, so
/// every node of a cluster holds the same one and the peer handshake's minting-key check covers
/// it too. Its ``fingerprint`` is written into the data directory, which a node started with
/// another secret then refuses: the stored hashes would match nothing. docs/security.md says
/// what rotating the secret means.
public struct IdentifierKey: Sendable {
    /// HMAC-SHA256 already keyed: copying it skips the key schedule on every identifier.
    private let keyed: HMAC<SHA256>
    /// The same HMAC for identifiers' fixed 17-byte messages, with both pads' states kept.
    private let identifiers: IdentifierHMAC
    /// Names the key without revealing it (written to `node.meta`).
    public let fingerprint: UInt64
    /// The seed of the claim index of every state the node builds, the same on every node of a
    /// cluster and across restarts, so that a snapshot's claims, listed in their index's order,
    /// restore front to back (``RegistryState/init(expectedDevices:claimSeed:tables:)``). As
    /// secret as the key: clients cannot pick identifiers that collide in the index.
    public let claimIndexSeed: UInt64

    /// The key of `secret`: HMAC-SHA256 of a fixed label under the secret's UTF-8 bytes.
    public init(secret: String) {
        let derived = HMAC<SHA256>.authenticationCode(
            for: Array("registry identifier key v1".utf8), using: SymmetricKey(data: Array(secret.utf8)))
        let key = SymmetricKey(data: Array(derived))
        keyed = HMAC<SHA256>(key: key)
        identifiers = IdentifierHMAC(key: Array(derived))
        let check = Array(HMAC<SHA256>.authenticationCode(for: Array("fingerprint".utf8), using: key))
        fingerprint = check.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
        let seed = Array(HMAC<SHA256>.authenticationCode(for: Array("claim index seed".utf8), using: key))
        claimIndexSeed = seed.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The identifier as the node keeps it: same kind, the keyed hash as its value. Never the
    /// all-zero UUID (which validation refuses), so a hash is always a valid identifier.
    public func seal(_ identifier: Identifier) -> Identifier {
        let (high, low) = identifiers.mac(
            kind: UInt8(truncatingIfNeeded: identifier.kind.rawValue), value: (identifier.value.high, identifier.value.low))
        let value = UUID128(high: high, low: low)
        return Identifier(kind: identifier.kind, value: value.isZero ? UUID128(high: 0, low: 1) : value)
    }

    /// ``seal(_:)`` through swift-crypto's `HMAC<SHA256>`: the same bytes, the reference that
    /// tests and `bench/Benchmarks/KeyedHashing` compare it with.
    public func sealWithSwiftCrypto(_ identifier: Identifier) -> Identifier {
        var mac = keyed
        // Three big-endian words, of which the first holds the kind in its last byte: hashing
        // from byte 7 covers exactly kind ‖ 16 bytes, with no allocation.
        var message = (
            UInt64(UInt8(truncatingIfNeeded: identifier.kind.rawValue)).bigEndian, identifier.value.high.bigEndian,
            identifier.value.low.bigEndian
        )
        withUnsafeBytes(of: &message) { raw in mac.update(data: UnsafeRawBufferPointer(rebasing: raw[7...])) }
        let code = mac.finalize()
        let value = code.withUnsafeBytes { bytes in
            UUID128(high: bytes.loadUnaligned(as: UInt64.self).bigEndian, low: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian)
        }
        return Identifier(kind: identifier.kind, value: value.isZero ? UUID128(high: 0, low: 1) : value)
    }

    /// The account key of `account`: HMAC-SHA256(key, "account:" ‖ the name's UTF-8 bytes), cut to
    /// 128 bits. The label keeps it apart from every identifier's hash, whose message is 17 bytes
    /// starting with a kind byte below 16.
    public func seal(_ account: AccountName) -> UUID128 {
        var mac = keyed
        mac.update(data: Array("account:".utf8))
        mac.update(data: Array(account.text.utf8))
        let code = mac.finalize()
        return code.withUnsafeBytes { bytes in
            UUID128(high: bytes.loadUnaligned(as: UInt64.self).bigEndian, low: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian)
        }
    }
}
