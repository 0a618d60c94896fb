import RegistryStorage
import RegistryWire

/// Why a node could not start. Nothing is written before these checks pass.
public enum NodeStartupError: Error, Equatable, Sendable, CustomStringConvertible {
    case storage(StorageError)
    /// The data directory belongs to another node ID than the one configured.
    case nodeIDMismatch(stored: String, configured: String)
    /// A log entry could not be decoded; the node refuses to serve a partial state.
    case corruptLog(origin: String, epoch: UInt64, sequence: UInt64, reason: String)
    /// The data directory was written by an earlier version (an SQLite log); nothing has been
    /// released, so there is no migration.
    case olderDataDirectory(String)
    /// The data directory was written by a version that kept identifiers raw.
    case identifiersNotHashed(String)
    /// The data directory's identifiers are hashed under another key (another cluster secret).
    case identifierKeyMismatch(String)
    /// No --cluster-secret, and the data directory keeps none, yet it has served before: under
    /// the cluster ID (an earlier version's public default), or under a secret now missing.
    case clusterSecretMissing(directory: String, keyedByClusterID: Bool)

    public var description: String {
        switch self {
        case .storage(let error): return error.description
        case .nodeIDMismatch(let stored, let configured):
            return "the data directory belongs to node \(stored), but --node-id is \(configured)"
        case .corruptLog(let origin, let epoch, let sequence, let reason):
            return "log entry \(origin)/\(epoch)/\(sequence) is unreadable: \(reason)"
        case .olderDataDirectory(let path):
            return
                "data directory \(path) was written by an earlier version (it holds registry.sqlite3); this version keeps its log in journal files and snapshots and does not read it. Move it aside and start on an empty directory"
        case .identifiersNotHashed(let path):
            return
                "data directory \(path) was written by an earlier version that kept device identifiers raw; this version keeps only keyed hashes and does not read it. Move it aside and start on an empty directory (a cluster member then catches up from its peers)"
        case .identifierKeyMismatch(let path):
            return
                "data directory \(path) holds identifiers hashed under another key: this node's --cluster-secret differs from the one it was started with. Start it with that secret, or move the directory aside (docs/security.md: rotating the secret)"
        case .clusterSecretMissing(let path, true):
            return
                "data directory \(path) was keyed by the cluster ID, a public value (an earlier version's default when no --cluster-secret was given), and this version no longer derives keys from it. To keep serving it as it is, pass the cluster ID as --cluster-secret; to be safe, move it aside and start on an empty directory, which makes a random secret (docs/security.md)"
        case .clusterSecretMissing(let path, false):
            return
                "data directory \(path) was keyed by a --cluster-secret, and none is given now: start the node with the same --cluster-secret"
        }
    }
}

extension NodeStartupError {
    /// Runs a start-up step whose calls throw storage errors or start-up errors, and gives every
    /// failure as a start-up error: a ``StorageError`` as ``storage(_:)``, anything else as a
    /// corrupt directory.
    static func typed<Result>(_ step: () throws -> Result) throws(NodeStartupError) -> Result {
        do {
            return try step()
        } catch let error as NodeStartupError {
            throw error
        } catch let error as StorageError {
            throw .storage(error)
        } catch {
            throw .storage(.corrupt("\(error)"))
        }
    }
}
