import Foundation
import Testing
@testable import RegistryCore

/// The Public Suffix List as a bundle ID's vendor boundary: the list's own rules (plain,
/// wildcard, exception, the implicit `*`), its text format, and the list Debian ships.
@Suite struct PublicSuffixListTests {
    static let sample = """
        // ===BEGIN ICANN DOMAINS===
        com
        uk
        co.uk
        // wildcard and exception, as the list has them for .ck
        *.ck
        !www.ck
        jp
        *.kawasaki.jp
        !city.kawasaki.jp
        io
        github.io   trailing words after white space are ignored
        """

    func vendor(_ bundle: String, _ list: PublicSuffixList) -> String {
        let labels = bundle.split(separator: ".")
        return labels.prefix(list.vendorLabelCount(labels)).joined(separator: ".")
    }

    @Test func theIssuesExamples() throws {
        let list = try PublicSuffixList(parsing: Self.sample)
        #expect(vendor("uk.co.bbc.iplayer", list) == "uk.co.bbc")
        #expect(vendor("uk.co.tesco.app", list) == "uk.co.tesco")
        #expect(vendor("com.acme.mail", list) == "com.acme")
    }

    @Test func wildcardsExceptionsAndTheImplicitRule() throws {
        let list = try PublicSuffixList(parsing: Self.sample)
        #expect(vendor("ck.foo.bar.app", list) == "ck.foo.bar")
        #expect(vendor("ck.www.app", list) == "ck.www")
        #expect(vendor("jp.kawasaki.shop.vendor.app", list) == "jp.kawasaki.shop.vendor")
        #expect(vendor("jp.kawasaki.city.app", list) == "jp.kawasaki.city")
        #expect(vendor("io.github.someone.app", list) == "io.github.someone")
        // A top-level label the list does not hold is a suffix of its own.
        #expect(vendor("zz.acme.app", list) == "zz.acme")
        // Rules match without regard to case.
        #expect(vendor("UK.Co.BBC.iPlayer", list) == "UK.Co.BBC")
        // A bundle ID no longer than its suffix is its own vendor.
        #expect(vendor("uk.co", list) == "uk.co")
        #expect(vendor("com", list) == "com")
    }

    /// An exception is the prevailing rule, even beside a longer plain rule below it.
    @Test func anExceptionPrevails() throws {
        let list = try PublicSuffixList(parsing: Self.sample + "\nshop.city.kawasaki.jp")
        #expect(vendor("jp.kawasaki.city.shop.app", list) == "jp.kawasaki.city")
    }

    @Test func eitherLineEndingReadsAlike() throws {
        let crlf = try PublicSuffixList(parsing: "// a comment\r\ncom\r\nco.uk\r\n*.ck\r\n")
        #expect(crlf == (try PublicSuffixList(parsing: "// a comment\ncom\nco.uk\n*.ck\n")))
        #expect(crlf.ruleCount == 3)
        #expect(vendor("uk.co.bbc.iplayer", crlf) == "uk.co.bbc")
    }

    @Test func badRulesSayWhichLine() {
        let cases: [(String, Int)] = [
            ("com\nco..uk", 2), ("com\n*.*.uk", 2), ("com\nuk.*", 2), ("com\n!*.ck", 2), ("!ck", 1), ("// only a comment\n", 2),
            ("com\r\n*ck", 2), ("com\nuk.c*", 2),
        ]
        for (text, line) in cases {
            #expect(throws: PublicSuffixList.Invalid.self) { try PublicSuffixList(parsing: text) }
            do {
                _ = try PublicSuffixList(parsing: text)
            } catch {
                #expect(error.line == line, "\(text.debugDescription)")
                #expect(error.description.hasPrefix("public suffix list, line \(line): "))
            }
        }
    }

    @Test func theFingerprintNamesTheRulesNotTheirOrder() throws {
        let one = try PublicSuffixList(parsing: "com\nco.uk\n*.ck")
        let reordered = try PublicSuffixList(parsing: "// same rules\n*.ck\nCO.UK\ncom")
        let another = try PublicSuffixList(parsing: "com\nco.uk")
        #expect(one.fingerprint == reordered.fingerprint)
        #expect(one.fingerprint != another.fingerprint)
        #expect(one == reordered)
    }

    /// The list Debian's `publicsuffix` package installs (`make test` installs the package).
    @Test func debiansList() throws {
        let text = try String(contentsOfFile: "/usr/share/publicsuffix/public_suffix_list.dat", encoding: .utf8)
        let list = try PublicSuffixList(parsing: text)
        #expect(list.ruleCount > 5_000)
        #expect(vendor("uk.co.bbc.iplayer", list) == "uk.co.bbc")
        #expect(vendor("uk.co.tesco.app", list) == "uk.co.tesco")
        #expect(vendor("com.acme.mail", list) == "com.acme")
        #expect(vendor("au.com.woolworths.app", list) == "au.com.woolworths")
        // The real list's wildcard and exception for .ck.
        #expect(vendor("ck.foo.bar.app", list) == "ck.foo.bar")
        #expect(vendor("ck.www.app", list) == "ck.www")
    }
}
