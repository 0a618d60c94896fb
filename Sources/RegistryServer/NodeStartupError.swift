import RegistryStorage
import RegistryWire

/// Why a node could not start. Nothing is written before these checks pass.
public enum NodeStartupError: Error, Equatable, Sendable, CustomStringConvertible {
    case storage(StorageError)
    /// The data directory belongs to another node ID than the one configured.
    case nodeIDMismatch(stored: String, configured: String)
    /// A log entry could not be decoded; the node refuses to serve a partial state.
    case corruptLog(origin: String, epoch: UInt64, sequence: UInt64, reason: String)
    /// Commits the previous run journaled (and acknowledged) could not be moved into the SQLite
    /// log, on a full disk for instance. They stay in the journal files for the next start.
    case journalNotMoved(operations: Int, commits: Int, reason: StorageError)

    public var description: String {
        switch self {
        case .storage(let error): return error.description
        case .nodeIDMismatch(let stored, let configured):
            return "the data directory belongs to node \(stored), but --node-id is \(configured)"
        case .corruptLog(let origin, let epoch, let sequence, let reason):
            return "log entry \(origin)/\(epoch)/\(sequence) is unreadable: \(reason)"
        case .journalNotMoved(let operations, let commits, let reason):
            return
                "cannot move \(operations) journaled operations (\(commits) group commits) into the SQLite log (\(reason)); they stay in the commit journal and nothing is lost: free space or fix the cause, then start the node again"
        }
    }
}
