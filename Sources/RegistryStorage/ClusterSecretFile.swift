/// `cluster.secret`: the secret a node made for itself on its first start when it was given
/// none (a single node). It keys identifier hashing, minting and peer proofs, so it is random
/// (32 bytes from the system's generator, as 64 hexadecimal digits), readable by the node's user
/// only (every data file is created mode 0600), and never logged: the node shows its
/// fingerprint. Replaced whole, like `node.meta`.
public enum ClusterSecretFile {
    public static let name = "cluster.secret"

    /// The directory's secret, nil when it has none.
    public static func read(from directory: String, on fs: some FileSystem) throws(StorageError) -> String? {
        guard try fs.list(directory).contains(name) else { return nil }
        let text = String(decoding: try fs.readAll(directory + "/" + name), as: UTF8.self)
        let secret = text.hasSuffix("\n") ? String(text.dropLast()) : text
        guard !secret.isEmpty, !secret.contains("\n") else {
            throw .corrupt("\(directory)/\(name) does not hold one line of secret")
        }
        return secret
    }

    /// Makes a new random secret and writes it, durably, before anything is keyed by it.
    public static func create(in directory: String, on fs: some FileSystem) throws(StorageError) -> String {
        var generator = SystemRandomNumberGenerator()
        var secret = ""
        for _ in 0..<4 {
            let word = String(generator.next(), radix: 16)
            secret += String(repeating: "0", count: 16 - word.count) + word
        }
        try fs.replace(directory + "/" + name, with: Array((secret + "\n").utf8), inDirectory: directory)
        return secret
    }
}
