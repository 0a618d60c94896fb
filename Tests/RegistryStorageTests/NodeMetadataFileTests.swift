import Testing
@testable import RegistryStorage

/// `node.meta`'s format line: what this version writes, and which it reads.
@Suite struct NodeMetadataFileTests {
    func write(_ text: String, on fs: SimulatedFileSystem) throws {
        try fs.replace("/data/" + NodeMetadataFile.name, with: Array(text.utf8), inDirectory: "/data")
    }

    func text(on fs: SimulatedFileSystem) throws -> String {
        String(decoding: try fs.readAll("/data/" + NodeMetadataFile.name), as: UTF8.self)
    }

    /// A directory of the format before (whose journal holds only "RRJ2" entries) reads, and is
    /// written back as format 2, which versions that read only format 1 refuse.
    @Test func theFormatBeforeReadsAndIsWrittenBackAsFormatTwo() throws {
        let fs = SimulatedFileSystem()
        try write("registry-node-meta 1\nnode=node-a\nepoch=7\nidentifier-key=1f\n", on: fs)
        let read = try #require(try NodeMetadataFile.read(from: "/data", on: fs))
        #expect(read == NodeMetadata(nodeID: "node-a", epoch: 7, identifierKey: 0x1F))
        try NodeMetadataFile.write(read, to: "/data", on: fs)
        #expect(try text(on: fs) == "registry-node-meta 2\nnode=node-a\nepoch=7\nidentifier-key=1f\n")
        #expect(try NodeMetadataFile.read(from: "/data", on: fs) == read)
    }

    /// A format this version does not know (a later one, or not a `node.meta` at all) is refused,
    /// naming what it found and what it reads.
    @Test(arguments: ["registry-node-meta 3", "registry-node-meta", "{\"node\": \"a\"}"])
    func anotherFormatIsRefused(first: String) throws {
        let fs = SimulatedFileSystem()
        try write(first + "\nnode=node-a\nepoch=7\n", on: fs)
        let error = #expect(throws: StorageError.self) { try NodeMetadataFile.read(from: "/data", on: fs) }
        guard case .corrupt(let message) = error else { return #expect(Bool(false), "\(String(describing: error))") }
        #expect(message.contains(first) && message.contains("registry-node-meta 1, registry-node-meta 2"), "\(message)")
    }
}
