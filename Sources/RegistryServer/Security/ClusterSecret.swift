import Logging
import RegistryCore
import RegistryStorage

/// Where a node's cluster secret comes from. It keys identifier hashing, device-ID minting and
/// the peer proofs, so it never derives from a public value such as the cluster ID:
/// - `--cluster-secret`, which every member of a cluster must be given (a node with peers
///   refuses to start without it, see ``NodeConfiguration/refuseSecretlessCluster()``);
/// - otherwise, for a single node, the secret it made on its first start and keeps in its data
///   directory (``ClusterSecretFile``), shown only by fingerprint.
enum ClusterSecret {
    static func resolve(
        configured: String?, clusterID: String, fs: any FileSystem, directory: String, logger: Logger
    ) throws(NodeStartupError) -> String {
        if let configured { return configured }
        return try NodeStartupError.typed {
            if let kept = try ClusterSecretFile.read(from: directory, on: fs) { return kept }
            if let metadata = try NodeMetadataFile.read(from: directory, on: fs) {
                // A directory that has served without a kept secret: an earlier version keyed it
                // by the cluster ID, or it was started with a --cluster-secret that is now missing.
                let legacy = metadata.identifierKey == IdentifierKey(secret: clusterID).fingerprint
                throw NodeStartupError.clusterSecretMissing(directory: directory, keyedByClusterID: legacy)
            }
            let made = try ClusterSecretFile.create(in: directory, on: fs)
            logger.notice(
                "made a random cluster secret for this single node, kept in its data directory (mode 0600); give every node of a cluster one --cluster-secret instead",
                metadata: ["file": "\(directory)/\(ClusterSecretFile.name)", "fingerprint": "\(fingerprint(of: made))"])
            return made
        }
    }

    /// Names a secret without revealing it (the minting key's fingerprint, in hexadecimal).
    static func fingerprint(of secret: String) -> String {
        String(MintingKey(secret: secret).fingerprint, radix: 16)
    }
}
