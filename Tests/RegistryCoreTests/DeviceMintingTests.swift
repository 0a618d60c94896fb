import Testing
@testable import RegistryCore

/// Deterministic minting: the same first install gets the same device ID on every node of a
/// cluster, so the common race between sibling apps needs no merge.
@Suite struct DeviceMintingTests {
    /// The first 16-byte outputs of the SipHash reference implementation (`vectors_sip128`),
    /// key 00 01 .. 0f, message 00 01 .. (n-1), for the lengths given.
    static let referenceVectors: [(length: Int, output: [UInt8])] = [
        (0, [0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93]),
        (1, [0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22, 0xfc, 0x45]),
        (7, [0xa1, 0xf1, 0xeb, 0xbe, 0xd8, 0xdb, 0xc1, 0x53, 0xc0, 0xb8, 0x4a, 0xa6, 0x1f, 0xf0, 0x82, 0x39]),
        (8, [0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4]),
        (15, [0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9]),
        (16, [0x6e, 0xe2, 0xa4, 0xca, 0x67, 0xb0, 0x54, 0xbb, 0xfd, 0x33, 0x15, 0xbf, 0x85, 0x23, 0x05, 0x77]),
        (63, [0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c]),
    ]

    @Test func sipHash128MatchesTheReferenceVectors() {
        for (length, output) in Self.referenceVectors {
            var hasher = SipHash128(k0: 0x0706_0504_0302_0100, k1: 0x0f0e_0d0c_0b0a_0908)
            hasher.combine((0..<length).map { UInt8($0) })
            let (first, second) = hasher.finalize()
            let bytes = (0..<8).map { UInt8(truncatingIfNeeded: first >> (8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: second >> (8 * $0)) }
            #expect(bytes == output, "length \(length)")
            var wordwise = SipHash128(k0: 0x0706_0504_0302_0100, k1: 0x0f0e_0d0c_0b0a_0908)
            (0..<length).map { UInt8($0) }.withUnsafeBytes { wordwise.combine($0) }
            #expect(wordwise.finalize() == (first, second), "length \(length), a word at a time")
        }
    }

    /// The documented rule, byte for byte: these IDs were computed by a separate SipHash-128
    /// (in Python, checked against the reference vectors above) over the vendor's UTF-8, the kind
    /// byte, the UUID's 16 bytes in UUID order and the generation's 4 bytes little-endian, under
    /// the key each secret derives. IDs minted by a cluster must never change.
    @Test func mintedIDsAreTheDocumentedSipHashOfTheirBytes() {
        #expect(
            DeviceID.minted(vendor: Vendor(trusted: "com.acme"), idfv: UUID128(high: 0x1234, low: 0x5678), key: MintingKey(secret: "s3cret")).description
                == "2ad873a8-0c1d-80fb-a52a-667139a4d32d")
        #expect(
            DeviceID.minted(vendor: Vendor(trusted: "com.acme"), keychain: UUID128(high: 0x1234, low: 0x5678), key: MintingKey(secret: "s3cret")).description
                == "6002c2bb-c750-8c13-af3f-b26d85b2c3b7")
        #expect(
            DeviceID.minted(
                vendor: Vendor(trusted: "com.example.longer-vendor"), idfv: UUID128(high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210),
                generation: 7, key: MintingKey(secret: "cluster")
            ).description == "b88b6996-14a3-8ad0-ba60-13ce5b937420")
    }

    /// Words and buffers combine as their bytes one by one do, whatever the bytes before them
    /// left in the hasher's tail.
    @Test(arguments: [1 as UInt64, 2, 3])
    func combiningWordsAndBuffersEqualsCombiningBytes(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let key = (random.next(), random.next())
            var bytewise = SipHash128(k0: key.0, k1: key.1)
            var mixed = SipHash128(k0: key.0, k1: key.1)
            for _ in 0..<Int(random.next() % 6) {
                switch random.next() % 3 {
                case 0:
                    let byte = UInt8(truncatingIfNeeded: random.next())
                    bytewise.combine(byte)
                    mixed.combine(byte)
                case 1:
                    let word = random.next()
                    for shift in stride(from: UInt64(0), to: 64, by: 8) { bytewise.combine(UInt8(truncatingIfNeeded: word >> shift)) }
                    mixed.combine(littleEndianBytesOf: word)
                default:
                    let bytes = (0..<Int(random.next() % 30)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    for byte in bytes { bytewise.combine(byte) }
                    bytes.withUnsafeBytes { mixed.combine($0) }
                }
            }
            let (a, b) = (bytewise.finalize(), mixed.finalize())
            #expect(a.first == b.first && a.second == b.second)
        }
    }

    @Test func mintedIDsDependOnVendorIDFVGenerationAndKey() {
        let key = MintingKey(secret: "s3cret")
        let idfv = UUID128(high: 0x1234, low: 0x5678)
        let vendor = Vendor(trusted: "com.acme")
        let id = DeviceID.minted(vendor: vendor, idfv: idfv, key: key)
        #expect(id == DeviceID.minted(vendor: vendor, idfv: idfv, key: MintingKey(secret: "s3cret")))
        #expect(id.description.dropFirst(14).first == "8", "a UUIDv8: \(id)")
        let others = [
            DeviceID.minted(vendor: Vendor(trusted: "com.other"), idfv: idfv, key: key),
            DeviceID.minted(vendor: vendor, idfv: UUID128(high: 0x1234, low: 0x5679), key: key),
            DeviceID.minted(vendor: vendor, idfv: idfv, generation: 1, key: key),
            DeviceID.minted(vendor: vendor, idfv: idfv, key: MintingKey(secret: "other")),
        ]
        // The keychain rule differs from the IDFV rule by one byte: the same UUID mints another ID.
        let byKeychain = DeviceID.minted(vendor: vendor, keychain: idfv, key: key)
        #expect(byKeychain == DeviceID.minted(vendor: vendor, keychain: idfv, key: MintingKey(secret: "s3cret")))
        #expect(Set(others + [id, byKeychain]).count == 6)
        #expect(key.fingerprint == MintingKey(secret: "s3cret").fingerprint)
        #expect(key.fingerprint != MintingKey(secret: "other").fingerprint)
    }

    /// Two sibling apps of a new phone register at the same moment on two replicas that have
    /// not heard of each other: with the IDFV alone, with one keychain UUID, each with its own
    /// fresh keychain UUID, or with the keychain UUID alone. Both answers name one device, and once the replicas exchange their
    /// operations neither holds an alias.
    @Test func siblingRaceGivesOneIDWithoutAMerge() throws {
        let rules = try VendorRules()
        let key = MintingKey(secret: "cluster")
        var generator = SplitMix64(seed: 7)
        // The last case is keychain-only (before the first unlock iOS gives no IDFV): the ID is
        // minted from the keychain UUID.
        let cases: [(idfv: Bool, String?, String?)] = [(true, nil, nil), (true, "k1", "k1"), (true, "k1", "k2"), (false, "k1", "k1")]
        for (withIDFV, keychainA, keychainB) in cases {
            let keychains = (keychainA, keychainB)
            let idfv = UUID128(high: generator.next() | 1, low: generator.next()).text
            func presented(_ keychain: String?) -> [PresentedIdentifier] {
                var list = withIDFV ? [PresentedIdentifier(rawKind: 2, text: idfv)] : []
                if let keychain {
                    list.append(PresentedIdentifier(rawKind: 1, text: UUID128(high: UInt64(keychain.utf8.last!), low: 1).text))
                }
                return list
            }
            let first = try Registration(bundle: "com.acme.app1", identifiers: presented(keychains.0), rules: rules)
            let second = try Registration(bundle: "com.acme.app2", identifiers: presented(keychains.1), rules: rules)
            var a = RegistryState()
            var b = RegistryState()
            let atA = HLCTimestamp(millis: 1_000, counter: 0)
            let atB = HLCTimestamp(millis: 999, counter: 3)
            let (opA, outcomeA) = a.register(first, at: atA, origin: NodeID(trusted: "node-a")) { _ in
                DeviceID.new(for: first, at: atA, key: key, using: &generator)
            }
            let (opB, outcomeB) = b.register(second, at: atB, origin: NodeID(trusted: "node-b")) { _ in
                DeviceID.new(for: second, at: atB, key: key, using: &generator)
            }
            #expect(outcomeA.device == outcomeB.device && outcomeA.created && outcomeB.created)
            let mintedFrom = first.identifiers.first { $0.kind == (withIDFV ? .idfv : .keychain) }!.value
            #expect(
                outcomeA.device
                    == (withIDFV
                        ? DeviceID.minted(vendor: first.vendor, idfv: mintedFrom, key: key)
                        : DeviceID.minted(vendor: first.vendor, keychain: mintedFrom, key: key)))
            #expect(outcomeA.replaced.isEmpty && outcomeB.replaced.isEmpty)
            a.apply(opB)
            b.apply(opA)
            #expect(a.snapshot() == b.snapshot())
            #expect(a.aliasCount == 0 && a.deviceCount == 1)
            // The earlier creation is the one both keep.
            #expect(a.resolve(outcomeA.device)?.device.created == atB)
            #expect(a.resolve(outcomeA.device)?.apps.count == 2)
        }
    }
}
