import LoadGeneration
import Testing

@Suite("registryload option parsing")
struct OptionParsingTests {
    @Test func mixOfOneKind() throws {
        let mix = try WorkloadMix(parsing: "first-install")
        #expect(mix.weights.map(\.kind) == [.firstInstall])
        #expect(!mix.needsKnownDevices)
        #expect(mix.description == "first-install")
    }

    @Test func weightedMixKeepsDeclarationOrderAndDropsZeroWeights() throws {
        let mix = try WorkloadMix(parsing: "returning=30, first-install=70,sibling=0")
        #expect(mix.weights.map(\.kind) == [.firstInstall, .returning])
        #expect(mix.weights.map(\.weight) == [70, 30])
        #expect(mix.needsKnownDevices)
        #expect(mix.description == "first-install=70,returning=30")
    }

    @Test(arguments: [
        ("first-instal", "unknown workload"),
        ("first-install=-1", "whole number"),
        ("first-install=x", "whole number"),
        ("returning=1,returning=2", "named twice"),
        ("first-install=0", "every weight is zero"),
        ("", "unknown workload"),
    ])
    func badMixesAreRefusedWithTheReason(text: String, reason: String) {
        #expect {
            try WorkloadMix(parsing: text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test func vendorPrefixNamesEveryVendorAndBundle() throws {
        try LoadCatalogue.check(vendorPrefix: LoadCatalogue.defaultVendorPrefix, vendors: 100, appsPerVendor: 3)
        try LoadCatalogue.check(vendorPrefix: "com.example-vendor", vendors: 12, appsPerVendor: 2)
        let catalogue = LoadCatalogue(vendors: 12, appsPerVendor: 2, vendorPrefix: "com.example-vendor")
        #expect(catalogue.vendorName(11) == "com.example-vendor11")
        #expect(catalogue.bundle(vendor: 11, app: 1) == "com.example-vendor11.app1")
        // Past 15 bytes: what the option is for.
        #expect(catalogue.bundle(vendor: 0, app: 0).utf8.count > 15)
        #expect(LoadCatalogue(vendors: 1, appsPerVendor: 1).bundle(vendor: 0, app: 0) == "com.load0.app0")
    }

    @Test(arguments: [
        ("comload", "two labels"),
        ("com.example.team", "two labels"),
        (".com", "two labels"),
        ("com.", "two labels"),
        ("com.ex ample", "valid bundle IDs"),
        ("com.exam_ple", "valid bundle IDs"),
    ])
    func badVendorPrefixesAreRefusedWithTheReason(prefix: String, reason: String) {
        #expect {
            try LoadCatalogue.check(vendorPrefix: prefix, vendors: 1, appsPerVendor: 1)
        } throws: { error in
            "\(error)".contains(reason) && "\(error)".contains("--vendor-prefix")
        }
    }

    /// The last vendor's last app is the longest name: a prefix that fits with one vendor can
    /// make it past a bundle ID's 255 bytes.
    @Test func vendorPrefixIsCheckedAgainstTheLongestBundleID() throws {
        let prefix = "com." + String(repeating: "x", count: 245)
        try LoadCatalogue.check(vendorPrefix: prefix, vendors: 1, appsPerVendor: 1)
        #expect("\(prefix)0.app0".utf8.count == 255)
        #expect {
            try LoadCatalogue.check(vendorPrefix: prefix, vendors: 100, appsPerVendor: 3)
        } throws: { error in
            "\(error)".contains("--vendor-prefix") && "\(error)".contains("255")
        }
    }

    @Test func durations() throws {
        #expect(try DurationText(parsing: "250us").nanoseconds == 250_000)
        #expect(try DurationText(parsing: "2ms").nanoseconds == 2_000_000)
        #expect(try DurationText(parsing: "1.5s").nanoseconds == 1_500_000_000)
        #expect(try DurationText(parsing: "2m").nanoseconds == 120_000_000_000)
        #expect(try DurationText(parsing: "7ns").nanoseconds == 7)
        for bad in ["2", "ms", "-1s", "1x", "abc", "nan s", "1e30s"] {
            #expect(throws: LoadConfigurationError.self) { try DurationText(parsing: bad) }
        }
    }

    @Test func durationFormatting() {
        #expect(DurationText.format(nanoseconds: 850) == "850ns")
        #expect(DurationText.format(nanoseconds: 1_240_000) == "1.24ms")
        #expect(DurationText.format(nanoseconds: 123_400_000) == "123ms")
        #expect(DurationText.format(nanoseconds: 3_500_000_000) == "3.5s")
    }

    @Test func objectives() throws {
        let p99 = try ServiceLevelObjective(parsing: "p99=2ms")
        #expect(p99.percentile == 99)
        #expect(p99.limit.nanoseconds == 2_000_000)
        #expect(p99.description == "p99=2ms")
        #expect(p99.isMet(by: 2_000_000))
        #expect(!p99.isMet(by: 2_000_001))
        #expect(try ServiceLevelObjective(parsing: "p99.9=10ms").name == "p99.9")
        #expect(try ServiceLevelObjective(parsing: "max=1s").percentile == 100)
        for bad in ["p99", "p0=1ms", "p101=1ms", "q99=1ms", "p99=2", "p99=fast"] {
            #expect(throws: LoadConfigurationError.self) { try ServiceLevelObjective(parsing: bad) }
        }
    }
}
