import Foundation
import Testing
@testable import RegistryServer

/// The settings tables in the README and docs/operations.md are generated from the settings'
/// one declaration (`make settings-docs`); this fails while one is stale.
@Suite struct SettingsDocsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(arguments: ["README.md", "docs/operations.md"])
    func theSettingsTablesAreTheDeclarations(file: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8)
        var tables = 0
        var rest = Substring(text)
        while let begin = rest.range(of: "<!-- settings:begin ") {
            let header = rest[begin.upperBound...]
            let close = try #require(header.range(of: " -->\n"), "\(file): an unclosed settings:begin marker")
            let names = String(header[..<close.lowerBound])
            let body = header[close.upperBound...]
            let end = try #require(body.range(of: "<!-- settings:end -->"), "\(file): settings:begin \(names) has no end marker")
            let expected = NodeSetting.markdownTable(flags: names == "all" ? nil : names.split(separator: ",").map(String.init))
            #expect(String(body[..<end.lowerBound]) == expected, "\(file): the table of \(names) is stale: run make settings-docs")
            if names != "all" {
                for name in names.split(separator: ",") {
                    #expect(NodeSetting.all.contains { $0.flag == name }, "\(file) names --\(name), which no setting has")
                }
            }
            tables += 1
            rest = body[end.upperBound...]
        }
        #expect(tables == 1, "\(file) should hold one generated settings table")
    }
}
