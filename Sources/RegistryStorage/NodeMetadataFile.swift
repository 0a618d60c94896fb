/// Who a data directory belongs to: the node's ID, its epoch (the start of its current log), and
/// the fingerprint of the key its identifiers are hashed under.
public struct NodeMetadata: Equatable, Sendable {
    public var nodeID: String
    public var epoch: UInt64
    /// The identifier key's fingerprint; nil in a directory written before identifiers were
    /// hashed, which therefore holds them raw.
    public var identifierKey: UInt64?

    public init(nodeID: String, epoch: UInt64, identifierKey: UInt64?) {
        self.nodeID = nodeID
        self.epoch = epoch
        self.identifierKey = identifierKey
    }
}

/// The data directory's small metadata file, `node.meta`: a few lines of text an operator can
/// read, replaced whole (written to a temporary name, synced, renamed, and the directory synced),
/// so that a crash leaves the old file or the new one.
public enum NodeMetadataFile {
    public static let name = "node.meta"
    static let format = "registry-node-meta 1"

    /// The metadata of the directory, nil when it has none (a new directory).
    public static func read(from directory: String, on fs: some FileSystem) throws(StorageError) -> NodeMetadata? {
        let path = directory + "/" + name
        guard try fs.list(directory).contains(name) else { return nil }
        let text = String(decoding: try fs.readAll(path), as: UTF8.self)
        var fields = [String: String]()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first.map(String.init) == format else { throw .corrupt("\(path) does not start with \"\(format)\"") }
        for line in lines.dropFirst() where !line.isEmpty {
            guard let equals = line.firstIndex(of: "=") else { throw .corrupt("\(path): the line \"\(line)\" is not key=value") }
            fields[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        guard let nodeID = fields["node"], !nodeID.isEmpty, let epochText = fields["epoch"], let epoch = UInt64(epochText) else {
            throw .corrupt("\(path) lacks its node or epoch")
        }
        var identifierKey: UInt64?
        if let keyText = fields["identifier-key"] {
            guard let key = UInt64(keyText, radix: 16) else { throw .corrupt("\(path): identifier-key \(keyText) is not hexadecimal") }
            identifierKey = key
        }
        return NodeMetadata(nodeID: nodeID, epoch: epoch, identifierKey: identifierKey)
    }

    /// Replaces the directory's metadata with `metadata`, durably.
    public static func write(_ metadata: NodeMetadata, to directory: String, on fs: some FileSystem) throws(StorageError) {
        var text = "\(format)\nnode=\(metadata.nodeID)\nepoch=\(metadata.epoch)\n"
        if let key = metadata.identifierKey { text += "identifier-key=\(String(key, radix: 16))\n" }
        try fs.replace(directory + "/" + name, with: Array(text.utf8), inDirectory: directory)
    }
}
