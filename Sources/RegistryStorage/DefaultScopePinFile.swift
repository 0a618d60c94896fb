import RegistryCore

/// The default vendor scope a data directory's devices were registered under
/// (`default-vendor.pin`): `labels=N`, or the whole Public Suffix List the node used, so that the
/// node keeps using that list whatever the machine's copy becomes. Replaced whole, as
/// ``NodeMetadataFile`` is.
public enum DefaultScopePinFile {
    public static let name = "default-vendor.pin"
    static let format = "registry-default-vendor 1"
    static let listMarker = "public-suffix-list"

    /// The pinned scope, nil when the directory has none (a new directory, or one written before
    /// pins existed).
    public static func read(from directory: String, on fs: some FileSystem) throws(StorageError) -> DefaultVendorScope? {
        let path = directory + "/" + name
        guard try fs.list(directory).contains(name) else { return nil }
        let text = String(decoding: try fs.readAll(path), as: UTF8.self)
        var lines = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        guard lines.count >= 2, lines.removeFirst() == format else { throw .corrupt("\(path) does not start with \"\(format)\"") }
        let kind = lines.removeFirst()
        if kind.hasPrefix("labels="), let depth = Int(kind.dropFirst("labels=".count)), depth >= 2 {
            return .labels(depth)
        }
        guard kind == listMarker, let list = lines.first else {
            throw .corrupt("\(path): \"\(kind)\" is neither labels=N (N at least 2) nor \(listMarker)")
        }
        do {
            return .publicSuffix(try PublicSuffixList(parsing: String(list)))
        } catch {
            throw .corrupt("\(path): \(error)")
        }
    }

    /// Replaces the directory's pin with `scope`, durably.
    public static func write(_ scope: DefaultVendorScope, to directory: String, on fs: some FileSystem) throws(StorageError) {
        var text = format + "\n"
        switch scope {
        case .labels(let depth): text += "labels=\(depth)\n"
        case .publicSuffix(let list): text += listMarker + "\n" + list.ruleText
        }
        try fs.replace(directory + "/" + name, with: Array(text.utf8), inDirectory: directory)
    }
}
