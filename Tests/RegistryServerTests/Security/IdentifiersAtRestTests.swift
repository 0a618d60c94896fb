import Foundation
import RegistryCore
import RegistryTestSupport
import RegistryWire
import Testing
@testable import RegistryServer

/// The data directory never holds a presented identifier: not in the journal, not in a
/// snapshot, not in the metadata. Every byte of every file is searched for each identifier in
/// every form it could be written in.
@Suite(.timeLimit(.minutes(5))) struct IdentifiersAtRestTests: EngineTesting {
    /// 100 devices, each with a keychain UUID and an IDFV, from a seeded generator.
    static let identifiers: [(keychain: UUID128, idfv: UUID128)] = {
        var generator = SplitMix64(seed: 31)
        return (0..<100).map { _ in
            (UUID128(high: generator.next(), low: generator.next()), UUID128(high: generator.next(), low: generator.next()))
        }
    }()

    /// Every way an identifier could sit in a file: its 16 bytes in either word order, and its
    /// text in either case, with and without dashes.
    static func forms(of value: UUID128) -> [[UInt8]] {
        let bigEndian = withUnsafeBytes(of: (value.high.bigEndian, value.low.bigEndian)) { Array($0) }
        let littleEndian = withUnsafeBytes(of: (value.high.littleEndian, value.low.littleEndian)) { Array($0) }
        let text = value.text
        let bare = text.replacingOccurrences(of: "-", with: "")
        return [bigEndian, littleEndian, bigEndian.reversed(), Array(text.utf8), Array(text.uppercased().utf8), Array(bare.utf8),
                Array(bare.uppercased().utf8)]
    }

    static func files(under path: String) -> [String: [UInt8]] {
        var contents = [String: [UInt8]]()
        for name in (FileManager.default.subpaths(atPath: path) ?? []) {
            let full = path + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue,
                let data = FileManager.default.contents(atPath: full)
            else { continue }
            contents[name] = Array(data)
        }
        return contents
    }

    /// The needles that occur in `haystack`. Each window's first 8 bytes are checked against
    /// the needles' first 8 bytes in a set, and only a match is compared whole, so that a scan
    /// costs one set lookup per byte of the file.
    static func occurrences(of needles: [[UInt8]], in haystack: [UInt8]) -> [[UInt8]] {
        var byPrefix = [UInt64: [[UInt8]]]()
        for needle in needles { byPrefix[prefix(needle, 0), default: []].append(needle) }
        var found = [[UInt8]]()
        guard haystack.count >= 8 else { return found }
        for start in 0...(haystack.count - 8) {
            guard let candidates = byPrefix[prefix(haystack, start)] else { continue }
            for needle in candidates where start + needle.count <= haystack.count && Array(haystack[start..<start + needle.count]) == needle {
                found.append(needle)
            }
        }
        return found
    }

    static func prefix(_ bytes: [UInt8], _ start: Int) -> UInt64 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: start, as: UInt64.self) }
    }

    @Test func noFileOfTheDataDirectoryHoldsAPresentedIdentifier() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let engine = try open(temp.path, journalFileBytes: 1 << 20)
        let requests = Self.identifiers.map {
            ClientBody.register(RegisterRequest(bundleID: "com.acme.app", keychain: $0.keychain.text, idfv: $0.idfv.text))
        }
        for answer in await submit(engine, requests) {
            guard case .registerResult(let result) = answer, result.created else { return #expect(Bool(false), "\(answer)") }
        }
        // A snapshot, then more operations in the journal after it.
        guard case .success = engine.pipeline.snapshotInForeground() else { return #expect(Bool(false), "snapshot failed") }
        _ = await submit(engine, Self.identifiers.map { ClientBody.register(RegisterRequest(bundleID: "com.acme.other", idfv: $0.idfv.text)) })
        engine.close()

        let files = Self.files(under: temp.path)
        #expect(files.keys.contains { $0.hasPrefix("snapshot-") } && files.keys.contains { $0.hasPrefix("journal-") })
        // The search reads what is there: the bundle IDs are stored as text.
        let bundle = Array("com.acme.other".utf8)
        #expect(files.values.contains { !Self.occurrences(of: [bundle], in: $0).isEmpty })
        let needles = Self.identifiers.flatMap { Self.forms(of: $0.keychain) + Self.forms(of: $0.idfv) }
        for (name, bytes) in files {
            for needle in Self.occurrences(of: needles, in: bytes) {
                Issue.record("\(name) holds a presented identifier: \(String(decoding: needle, as: UTF8.self)) \(needle)")
            }
        }

        // Lookups hash what they are given, after a restart too.
        let reopened = try open(temp.path)
        defer { reopened.close() }
        let (keychain, _) = Self.identifiers[7]
        let answers = await submit(reopened, [
            .lookup(LookupRequest(scope: .vendor("com.acme"), identifier: PresentedIdentifier(rawKind: 1, text: keychain.text))),
        ])
        guard case .device = answers[0] else { return #expect(Bool(false), "\(answers)") }
    }

    @Test func aDataDirectoryHashedUnderAnotherSecretIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        try open(temp.path).close()
        var configuration = NodeConfiguration()
        configuration.dataDirectory = temp.path
        configuration.clusterSecret = "another secret"
        #expect(throws: NodeStartupError.identifierKeyMismatch(temp.path)) {
            try RegistryEngine(configuration: configuration, logger: .quiet())
        }
    }

    @Test func aDataDirectoryThatKeptIdentifiersRawIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        try "registry-node-meta 1\nnode=node-a\nepoch=7\n".write(toFile: temp.path + "/node.meta", atomically: true, encoding: .utf8)
        #expect(throws: NodeStartupError.identifiersNotHashed(temp.path)) { try open(temp.path) }
    }
}
