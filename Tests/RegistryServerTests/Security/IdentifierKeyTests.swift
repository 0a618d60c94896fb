import RegistryCore
import Testing
@testable import RegistryServer

@Suite struct IdentifierKeyTests {
    let value = UUID128(text: "6f1c2a9e-0b7d-4c3e-9a51-2d8e4f6a7b90")!

    /// Expected values computed apart, with Python's hmac module:
    /// k = HMAC-SHA256(b"s3cret", b"registry identifier key v1");
    /// HMAC-SHA256(k, bytes([kind]) + uuid.bytes)[:16], HMAC-SHA256(k, b"fingerprint")[:8], and
    /// HMAC-SHA256(k, b"claim index seed")[:8].
    @Test func hashesMatchAnIndependentHMAC() throws {
        let key = IdentifierKey(secret: "s3cret")
        #expect(key.seal(Identifier(kind: .idfv, value: value)).value.text == "3200fde6-68a7-3c08-92ac-25712c2669d5")
        #expect(key.seal(Identifier(kind: .keychain, value: value)).value.text == "55d3059c-83a6-bcc0-c658-4017ff5fb47a")
        #expect(key.fingerprint == 0x0362_56f6_82cf_3d73)
        #expect(key.claimIndexSeed == 0xe89d_99d7_d8a6_7ad9)
    }

    /// The hash with both pads' states kept (``IdentifierHMAC``) gives swift-crypto's
    /// `HMAC<SHA256>` bytes, for every kind, many values and several secrets.
    @Test func thePrecomputedHMACGivesSwiftCryptosBytes() {
        var random = SplitMix64(seed: 2_104)
        for secret in ["s3cret", "", "a much longer cluster secret than any block of SHA-256 holds, by some way"] {
            let key = IdentifierKey(secret: secret)
            for index in 0..<2_000 {
                let kind = IdentifierKind(rawValue: Int32(1 + index % 2))!
                let identifier = Identifier(kind: kind, value: UUID128(high: random.next(), low: random.next()))
                #expect(key.seal(identifier) == key.sealWithSwiftCrypto(identifier), "\(secret.debugDescription) \(identifier)")
            }
        }
    }

    @Test func anotherSecretGivesOtherHashesAndAnotherFingerprint() {
        let one = IdentifierKey(secret: "s3cret"), other = IdentifierKey(secret: "s3cret2")
        let identifier = Identifier(kind: .idfv, value: value)
        #expect(one.seal(identifier) != other.seal(identifier))
        #expect(one.fingerprint != other.fingerprint)
        #expect(one.claimIndexSeed != other.claimIndexSeed)
        #expect(one.seal(identifier) == IdentifierKey(secret: "s3cret").seal(identifier))
    }

    @Test func sealingARegistrationKeepsItsBundleKindsAndRejections() throws {
        let presented = [PresentedIdentifier(rawKind: 2, text: value.text), PresentedIdentifier(rawKind: 1, text: "not a uuid")]
        let registration = try Registration(bundle: "com.acme.app", identifiers: presented, rules: VendorRules())
        var resolver = BundleResolver(rules: try VendorRules(), capacity: 0)
        let key = IdentifierKey(secret: "s3cret")
        let sealed = try Registration(bundle: "com.acme.app", identifiers: presented, resolver: &resolver) { key.seal($0) }
        #expect(sealed.bundle == registration.bundle && sealed.vendor == registration.vendor)
        #expect(sealed.identifiers.map(\.kind) == [.idfv])
        #expect(sealed.identifiers[0].value != value)
        #expect(sealed.rejected == registration.rejected)
    }
}
