import Foundation
import Logging
import Testing
@testable import RegistryServer

@Suite struct JSONLogHandlerTests {
    @Test func aLineIsOneJSONObjectWithItsMetadata() throws {
        let line = JSONLogHandler.line(
            at: (1_764_126_900, 7), level: .warning, label: "registryd", message: "quote \" backslash \\ newline \n tab \t bell \u{07}",
            metadata: ["peer": "127.0.0.1:9", "count": "3"])
        #expect(line.hasSuffix("}\n") && line.dropLast().firstIndex(of: "\n") == nil)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["ts"] as? String == "2025-11-26T03:15:00.007Z")
        #expect(object["level"] as? String == "warning" && object["label"] as? String == "registryd")
        #expect(object["message"] as? String == "quote \" backslash \\ newline \n tab \t bell \u{07}")
        #expect(object["metadata"] as? [String: String] == ["peer": "127.0.0.1:9", "count": "3"])
    }

    /// Dates checked against Foundation's calendar, across leap days and centuries.
    @Test(arguments: [Int64(0), 951_782_400, 4_107_542_399, 1_709_164_800, -86_400, 253_402_300_799])
    func timestampsMatchFoundation(_ seconds: Int64) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds) + 0.25))
        #expect(JSONLogHandler.iso8601((seconds, 250)) == expected)
    }
}
